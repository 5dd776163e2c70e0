"""`harness model serve`: the packaged local model behind an OpenAI-compatible server on 127.0.0.1.

No CORS by default (a page of another origin cannot read an answer); `--cors-origin ORIGIN` allows
that one origin, never with credentials. With `--api-key-file FILE` (or HARNESS_MODEL_SERVER_API_KEY)
every request needs `Authorization: Bearer KEY`. The Host header must name the server (DNS rebinding).

Runs in the foreground until Ctrl-C or SIGTERM, then stops the server's whole process group. Exit
codes: 0 stopped by the operator (130 for Ctrl-C, as every command), 2 bad input or the `local`
extra missing, 3 the server failed to start or exited by itself.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from harness.cli.common import EXIT_INFRA, print_safe, stderr_progress
from harness.config import Secrets, load
from harness.errors import ConfigError
from harness.models.factory import tool_format
from harness.models.llama_serve import ORIGIN_EXAMPLE, check_origin
from harness.models.local import EXAMPLE, LOCAL_MODELS, server_for
from harness.models.local_server import KEY_VARIABLE


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("model", help="serve the packaged local model (needs the `local` extra)")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    s = actions.add_parser("serve", help="start the OpenAI-compatible server on 127.0.0.1 until Ctrl-C",
                           description="Serve a local model (llama.cpp via llama-cpp-python) on 127.0.0.1, "
                                       "for `harness run --model openai:NAME --base-url URL` or any "
                                       "OpenAI-compatible client. `harness run --model local:NAME` starts "
                                       "and stops one by itself.",
                           epilog="e.g. harness model serve --port 8080")
    s.add_argument("--name", default="gemma3-270m", choices=sorted(LOCAL_MODELS),
                   help="the packaged model (default gemma3-270m)")
    s.add_argument("--model-path", type=Path, metavar="GGUF",
                   help="serve this GGUF file instead of the packaged weights")
    s.add_argument("--port", type=int, metavar="P", help="the port on 127.0.0.1 (default: a free one)")
    s.add_argument("--tool-format", choices=["auto", "native", "react"], default="auto",
                   help="native: a chat format with OpenAI tool calls (chatml-function-calling); react: the "
                        "model's own template, for ReAct text; auto (default): the one that measured better")
    s.add_argument("--cors-origin", metavar="ORIGIN",
                   help="let pages of this one origin call the server from a browser (no credentials), "
                        f"{ORIGIN_EXAMPLE}; default: no CORS")
    s.add_argument("--api-key-file", type=Path, metavar="FILE",
                   help=f"require `Authorization: Bearer KEY` with the key in FILE (or set {KEY_VARIABLE}); "
                        "default: no key")
    s.set_defaults(func=_serve)


def api_key(path: Path | None, secrets: Secrets) -> str | None:
    """The key of --api-key-file (its one line), else the environment's (through the config), else None."""
    if path is None:
        return secrets.model_server_api_key
    example = "e.g. --api-key-file ~/.config/harness/model-key (one line: the key)"
    try:
        key = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--api-key-file {str(path)!r} cannot be read ({exc}); {example}") from exc
    if not key or any(c.isspace() for c in key):
        raise ConfigError(f"--api-key-file {str(path)!r} holds no key (it must hold one line, the key, no spaces); "
                          f"{example}")
    return key


def _serve(args: argparse.Namespace) -> int:
    config, secrets = load()
    try:
        origin = None if args.cors_origin is None else check_origin(args.cors_origin)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    key = api_key(args.api_key_file, secrets)
    fmt = tool_format(f"local:{args.name}", config.replace(
        model=dataclasses.replace(config.model, tool_format=args.tool_format)))
    config = config.replace(model=dataclasses.replace(config.model, tool_format=fmt))
    server = server_for(args.name, config, model_path=args.model_path, port=args.port, say=stderr_progress("model"))
    server.api_key, server.cors_origin = key, origin
    try:   # the server's process group is stopped on the way out, whatever ends this
        server.start(stderr_progress("model"))
        print_safe(sys.stdout, f"serving {args.name} at {server.base_url} (chat format {server.chat_format}); "
                               "Ctrl-C stops it")
        print_safe(sys.stdout, f"CORS: {'only ' + origin + ' (no credentials)' if origin else 'none'}; API key: "
                               f"{'required (Authorization: Bearer)' if key else 'none'}")
        print_safe(sys.stdout, f"use it: harness run tasks/wordcount --model openai:{args.name} --base-url "
                               f"{server.base_url} --tool-format {fmt}   (or --model {EXAMPLE}, "
                               "which starts its own)")
        code = server.wait()
        print_safe(sys.stderr, f"harness model: the server exited by itself with code {code}; its output ends "
                               f"with:\n{server.output_tail()}")
        return EXIT_INFRA
    finally:
        server.stop()

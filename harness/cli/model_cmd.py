"""`harness model serve`: the packaged local model behind an OpenAI-compatible server on 127.0.0.1.

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
from harness.config import load
from harness.models.factory import tool_format
from harness.models.local import EXAMPLE, LOCAL_MODELS, server_for


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
    s.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    config, _ = load()
    fmt = tool_format(f"local:{args.name}", config.replace(
        model=dataclasses.replace(config.model, tool_format=args.tool_format)))
    config = config.replace(model=dataclasses.replace(config.model, tool_format=fmt))
    server = server_for(args.name, config, model_path=args.model_path, port=args.port, say=stderr_progress("model"))
    try:   # the server's process group is stopped on the way out, whatever ends this
        server.start(stderr_progress("model"))
        print_safe(sys.stdout, f"serving {args.name} at {server.base_url} (chat format {server.chat_format}); "
                               "Ctrl-C stops it")
        print_safe(sys.stdout, f"use it: harness run tasks/wordcount --model openai:{args.name} --base-url "
                               f"{server.base_url} --tool-format {fmt}   (or --model {EXAMPLE}, "
                               "which starts its own)")
        code = server.wait()
        print_safe(sys.stderr, f"harness model: the server exited by itself with code {code}; its output ends "
                               f"with:\n{server.output_tail()}")
        return EXIT_INFRA
    finally:
        server.stop()

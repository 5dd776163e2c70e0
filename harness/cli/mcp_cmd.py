"""`harness mcp --dir DIR`: serve the sandbox to MCP clients, over stdio (default) or streamable HTTP."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from harness.cli.common import print_safe, stderr_progress
from harness.config import APPROVAL_MODES, load
from harness.errors import ConfigError
from harness.mcp.specs import IDLE_SECONDS, MAX_SESSIONS, SESSION_MEMORY, session_limits


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "mcp", help="serve DIR's sandbox to MCP clients (stdio, or --http)",
        description="An MCP server: each MCP session gets a network-less, hardened sandbox holding DIR's files "
                    "and the agent loop's tools (bash, view, search, find_code, edit, apply_patch, write), the "
                    "outbound tools behind the approval gate, propose_changes (the session's patch) and "
                    "apply_changes (writes it into DIR once approved). DIR is only read until then.")
    p.add_argument("--dir", type=Path, required=True, help="the project's folder")
    p.add_argument("--approve", choices=APPROVAL_MODES, default=None,
                   help="requests no policy rule decides: ask/queue wait for `harness approvals approve` or the "
                        "web page (ask also prompts on this terminal with --http); deny refuses them "
                        "(default: ask)")
    p.add_argument("--python", default="3.11", metavar="X", help="the sandbox's Python (default 3.11)")
    p.add_argument("--include", action="append", default=[], metavar="PATTERN",
                   help="put back a file left out as a secret (a path or glob, e.g. --include config/.env.test)")
    p.add_argument("--pool", type=int, default=0, metavar="N",
                   help="keep N sandboxes started ahead (staged, started, baseline made), so a session's first call "
                        "does not wait for one; each serves one session, and one whose folder changed meanwhile "
                        "is replaced (default 0)")
    p.add_argument("--memory", default=SESSION_MEMORY, metavar="SIZE",
                   help=f"memory of each session's sandbox, its tmpfs mounts included (/workspace half of it, /tmp a "
                        f"quarter); default {SESSION_MEMORY}")
    p.add_argument("--max-sessions", type=int, default=MAX_SESSIONS, metavar="N",
                   help=f"--http: sessions open at once; the next is refused, saying so (default {MAX_SESSIONS}); the "
                        "host holds at most (N + --pool) x --memory")
    p.add_argument("--allow-binary", action="store_true",
                   help="let apply_changes write files git treats as binary (each shown to the approver as text with "
                        "unsafe bytes escaped); without it such a change is refused")
    p.add_argument("--http", action="store_true", help="serve streamable HTTP on 127.0.0.1 instead of stdio")
    p.add_argument("--port", type=int, default=8770, help="--http port (default 8770; 0: any free port)")
    p.add_argument("--token-file", type=Path, default=None,
                   help="--http: where the bearer token is written (0600; default STATE_DIR/mcp-token). "
                        "$HARNESS_MCP_TOKEN sets the token itself")
    p.add_argument("--idle", type=float, default=IDLE_SECONDS, metavar="S",
                   help=f"--http: a session's sandbox is removed after S seconds without a call "
                        f"(default {IDLE_SECONDS:g})")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    config, secrets = load()
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port} is not a TCP port; expected 0 to 65535, e.g. --port 8770")
    if not 0 <= args.pool <= 16:
        raise ConfigError(f"--pool {args.pool} is not a count of sandboxes to keep ready; expected 0 to 16, e.g. "
                          "--pool 2")
    if not 1 <= args.max_sessions <= 256:
        raise ConfigError(f"--max-sessions {args.max_sessions} is not a count of sessions; expected 1 to 256, e.g. "
                          "--max-sessions 4")
    limits = session_limits(config.sandbox.limits, args.memory)
    if not re.fullmatch(r"3\.\d{1,2}", args.python):
        raise ConfigError(f"--python {args.python!r} is not a Python version; expected 3.X, e.g. --python 3.11")
    from harness.mcp.http_guard import write_token  # noqa: PLC0415 - SDK: see connect.py
    from harness.mcp.server import SandboxService, serve_http, serve_stdio  # noqa: PLC0415 - SDK: see connect.py
    say = stderr_progress("harness mcp")
    service = SandboxService(args.dir, config, approve=args.approve or "ask", python=args.python,
                             include=tuple(args.include), say=say, pool=args.pool,
                             max_sessions=args.max_sessions, limits=limits, allow_binary=args.allow_binary)
    if not args.http:
        serve_stdio(service)
        return 0
    token_file = args.token_file or config.approval.state_dir / "mcp-token"
    token = write_token(token_file, secrets.mcp_token)

    def ready(port: int) -> None:
        print_safe(sys.stderr, f"harness mcp: serving {args.dir} on http://127.0.0.1:{port}/mcp; send "
                               f"`Authorization: Bearer <token>` with the token in {token_file}; at most "
                               f"{args.max_sessions} sessions of {limits.memory} each")

    serve_http(service, args.port, token, idle_seconds=args.idle, ready=ready)
    return 0

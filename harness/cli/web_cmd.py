"""`harness web`: the web console (runs, trajectories, patches, evaluation reports and approvals).

`harness approvals serve` is the same server opened on its approvals view. The web stack
(Starlette, uvicorn) is imported only when a server starts: every other command starts without it.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from harness.approval.queue import ApprovalQueue
from harness.cli.common import print_safe
from harness.config import load
from harness.errors import ConfigError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "web", help="the web console: runs, trajectories, patches, evaluation reports, approvals",
        description="Serve the web console on 127.0.0.1: every run and evaluation below ./runs and the state "
                    "folder's runs (and any --runs DIR), followed live, and the outbound requests waiting for "
                    "approval. Open the URL it prints: it carries the sign-in token.",
        epilog="e.g. harness web --runs ~/experiments/runs --port 8765")
    add_server_options(p, default_port_help="8765")
    p.add_argument("--runs", action="append", type=Path, default=[], metavar="DIR",
                   help="also show the runs and evaluations below DIR (repeatable)")
    p.add_argument("--state-dir", type=Path, help="where approvals.sqlite3 lives (default: $HARNESS_STATE_DIR "
                                                  "or the user's state dir)")
    p.set_defaults(func=_run)


def add_server_options(p: argparse.ArgumentParser, default_port_help: str) -> None:
    p.add_argument("--host", help="bind address (default 127.0.0.1; anything else exposes the console to the "
                                  "network, still behind its token)")
    p.add_argument("--port", type=int, help=f"port (default {default_port_help}; 0 picks a free one)")
    p.add_argument("--token", help="access token (default: a new random one, printed in the URL)")
    p.add_argument("--allow-host", action="append", default=[],
                   help="extra Host header value accepted (behind a proxy), e.g. console.example:8765")
    p.add_argument("--session-hours", type=float, metavar="H",
                   help="how long a sign-in lasts before the URL with the token is needed again (default 12, "
                        "or approval.web_session_hours of the config)")


def serve_console(queue: ApprovalQueue, args: argparse.Namespace, roots: list[Path], host: str, port: int,
                  landing: str, label: str) -> int:
    """Bind, print the sign-in URL, serve until Ctrl-C or SIGTERM."""
    from harness.web.server import default_roots, make_web_server  # noqa: PLC0415 - the web stack only when serving

    hours = load()[0].approval.web_session_hours if args.session_hours is None else args.session_hours
    if not (hours > 0 and math.isfinite(hours)):
        raise ConfigError(f"--session-hours {hours} is not a duration; expected hours > 0, e.g. --session-hours 12")
    if args.port is not None and not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port} is not a TCP port; expected 0 to 65535, e.g. --port 8765")
    given = [r.expanduser().resolve() for r in roots]
    folders = [f for f in default_roots(queue.state_dir) if not any(f.is_relative_to(g) for g in given)] + given
    missing = [str(r) for r in roots if not r.expanduser().is_dir()]
    if missing:
        raise ConfigError(f"--runs {missing[0]!r} is not a folder; pass a folder holding run or evaluation "
                          "folders, e.g. --runs runs")
    server = make_web_server(queue, list(dict.fromkeys(folders)), host=args.host or host,
                             port=port if args.port is None else args.port, token=args.token,
                             extra_hosts=args.allow_host, landing=landing, state_dir=queue.state_dir,
                             session_seconds=hours * 3600)
    print(f"{label}: {server.url}", flush=True)
    print_safe(sys.stderr, "showing runs below: " + ", ".join(str(f) for f in server.console.roots.paths)
               + ", and wherever `harness run`/`eval` wrote (recorded in " + str(queue.state_dir) + ")")
    server.serve_forever()
    return 0


def _run(args: argparse.Namespace) -> int:
    config, _ = load()
    state_dir = args.state_dir or config.approval.state_dir
    queue = ApprovalQueue(state_dir)
    try:
        return serve_console(queue, args, args.runs, config.approval.web_host, config.approval.web_port,
                             landing="runs", label="web console")
    finally:
        queue.close()

"""`harness shell [--dir DIR]`: an interactive loop over the sandbox's channel, for debugging a task, in the
workspace a session gets (/workspace is its git repository, one commit of the starting files)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli.common import open_folder_workspace, print_safe
from harness.config import load
from harness.tools.shell.bash import budget_of, run_command

BANNER = ("sandbox shell: each line runs as the model's bash tool would run it (no network, fresh process "
          "group, output shown as the model sees it). Ctrl-D or 'exit' to leave; the sandbox is removed.")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("shell", help="interactive commands in a sandbox, shown as the model sees them")
    p.add_argument("--dir", type=Path, default=None, help="project folder copied into /workspace")
    p.add_argument("--timeout", type=float, default=None, help="seconds before each command is killed")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    config = load()[0]
    t = config.tools
    budget = budget_of(t)
    timeout = args.timeout if args.timeout is not None else t.command_timeout
    with open_folder_workspace(args.dir, config) as workspace:
        print_safe(sys.stderr, BANNER)
        while True:
            try:
                line = input("sandbox$ ")
            except EOFError:
                print_safe(sys.stderr, "")
                return 0
            if line.strip() in ("exit", "quit"):
                return 0
            if line.strip():
                print_safe(sys.stdout, run_command(workspace.sandbox, line, timeout, budget)[1])

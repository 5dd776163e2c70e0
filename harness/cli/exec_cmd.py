"""`harness exec [--dir DIR] [--timeout S] [--json] -- COMMAND`: one command, as the model would see it, in
the workspace a session gets (/workspace is its git repository, one commit of the starting files)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from harness.cli.common import EXIT_HARNESS_FAILED, EXIT_TIMEOUT, open_folder_workspace, print_safe
from harness.config import load
from harness.errors import ConfigError, HarnessError
from harness.tools.shell.bash import budget_of, run_command
from sandbox.errors import SandboxError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("exec", help="run one command in a fresh sandbox and print what the model would see",
                       description="Opens a fresh sandbox holding DIR's files as a session's workspace "
                                   "(/workspace a git repository of the starting files), runs COMMAND "
                                   "through the shell tool, prints the observation and exits with the command's "
                                   "exit code; 124 when it was killed at its timeout, 125 when the harness "
                                   "itself failed (bad input, no Docker, no image).")
    p.add_argument("--dir", type=Path, default=None, help="project folder copied into /workspace (default: none)")
    p.add_argument("--timeout", type=float, default=None, help="seconds before the command is killed")
    p.add_argument("--json", action="store_true", help="print the structured result as JSON")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        return _exec(args)
    except (HarnessError, SandboxError) as exc:
        print_safe(sys.stderr, f"harness exec: {type(exc).__name__}: {exc}")
        return EXIT_HARNESS_FAILED


def _exec(args: argparse.Namespace) -> int:
    words = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not words:
        raise ConfigError("no command given; put it after --, e.g. harness exec --dir . -- python -m pytest -q")
    command = " ".join(words) if len(words) > 1 else words[0]
    config = load()[0]
    timeout = args.timeout if args.timeout is not None else config.tools.command_timeout
    with open_folder_workspace(args.dir, config, quiet=args.json) as workspace:
        result, observation = run_command(workspace.sandbox, command, timeout, budget_of(config.tools))
    if args.json:   # ASCII JSON: the same data, with nothing a terminal would act on
        print(json.dumps({"observation": observation, **dataclasses.asdict(result)}))
    else:
        print_safe(sys.stdout, observation)
    return EXIT_TIMEOUT if result.timed_out else result.exit_code

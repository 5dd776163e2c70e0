"""`harness demo`: the built-in default job. Opens a sandbox on the demo task and runs a few commands
through the shell tool, printing exactly what the model would see."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.common import open_sandbox
from harness.config import load
from harness.tools.shell import bash_tool
from harness.tools.base import ToolContext

DEMO_TASK = Path(__file__).resolve().parents[2] / "tasks" / "wordcount"
COMMANDS = ["ls -R", "python -m pytest -q", "python -c \"import urllib.request as u; u.urlopen('http://example.com')\""]


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("demo", help="the built-in default: a sandbox session on tasks/wordcount")
    p.add_argument("--task", type=Path, default=DEMO_TASK, help="task folder (default: tasks/wordcount)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    config = load()[0]
    tool = bash_tool(config.tools)
    with open_sandbox(args.task / "repo", config) as box:
        ctx = ToolContext(sandbox=box, session=box.session)
        for command in COMMANDS:
            print(f"\n$ {command}")
            print(tool.function(ctx, command=command))
    return 0

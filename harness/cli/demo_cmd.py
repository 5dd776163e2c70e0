"""`harness demo`: the built-in default, a real agent session on the demo task wordcount.

The task ships inside the package (harness/data/tasks/wordcount, kept identical to tasks/wordcount by
a test), so an installed wheel runs the demo from any folder: it is copied to a temporary folder for
the session, since a task is loaded from a real directory.

With ANTHROPIC_API_KEY or OPENAI_API_KEY (or HARNESS_MODEL, or --model) it uses that model; with
none it replays a recorded repair shipped in the package (harness/data/scripts/wordcount-fix.json)
through the same real sandbox and tools. Either way it then shows the agent's patch and the task's
tests run on the result.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from harness.agent.trajectory import load_trajectory
from harness.cli.common import print_safe
from harness.cli.run_cmd import execute, exit_code, find_task, print_summary
from harness.config import Config, Secrets, load
from harness.errors import ConfigError, TaskError
from harness.models.factory import resolve_auto
from sandbox.text import escape_ident

DEMO_TASK = "wordcount"   # harness/data/tasks/<this>
DEMO_SCRIPT = "scripted:wordcount-fix"
SKIP_NAMES = frozenset({"__pycache__"})   # what an installer may add beside the shipped files
SKIP_SUFFIXES = (".pyc", ".pyo")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo", help="the built-in default: an agent repairs the wordcount task in a sandbox",
                       description="Run an agent session on the demo task: a real model when an API key is set, "
                                   "else a recorded repair replayed through the real sandbox and tools.")
    p.add_argument("--task", type=Path, help="task folder (default: the wordcount task shipped in the package)")
    p.add_argument("--model", help=f"model spec (default: by the API key found, else {DEMO_SCRIPT})")
    p.add_argument("--out", type=Path, help="output directory (default: runs/demo-YYYYmmdd-HHMMSS)")
    p.set_defaults(func=_run)


def choose_model(config: Config, secrets: Secrets, given: str | None) -> tuple[str, str]:
    """The model spec for the demo and a sentence saying why it was chosen."""
    if given:
        return given, "given with --model"
    if config.model.spec != "auto":
        return config.model.spec, "from HARNESS_MODEL"
    try:
        spec = resolve_auto("auto", config, secrets)
    except ConfigError:
        return DEMO_SCRIPT, ("no ANTHROPIC_API_KEY or OPENAI_API_KEY set: replaying the recorded repair that "
                             "ships with harness, through the real sandbox and tools")
    return spec, "an API key was found in the environment"


def _run(args: argparse.Namespace) -> int:
    config, secrets = load()
    spec, why = choose_model(config, secrets, args.model)
    config = config.replace(model=dataclasses.replace(config.model, spec=spec))
    show = sys.stdout   # everything below the model, the task or the tests wrote: escaped
    with ExitStack() as stack:   # the packaged task's temporary copy lives as long as the session
        task = find_task(args.task or stack.enter_context(packaged_task(DEMO_TASK)))
        out = args.out or Path("runs") / f"demo-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"
        print_safe(show, f"demo: task {task.id} ({task.repo_dir}), model {spec}: {why}")
        print_safe(show, f"problem: {task.problem_statement.strip().splitlines()[0]}")
        outcome = execute(task, config, secrets, out)
    print_safe(show, "\n--- what the agent did (trajectory.jsonl) ---")
    print_safe(show, steps(out / "trajectory.jsonl"))
    print_safe(show, "\n--- the agent's patch (patch.diff) ---")
    print_safe(show, outcome.patch.rstrip() or "(the agent changed nothing)")
    tests = out / "tests.txt"
    if tests.is_file():
        lines = tests.read_text().rstrip().splitlines()
        print_safe(show, "\n--- the task's tests, run in a fresh sandbox on the patch (tests.txt) ---")
        shown = lines[:2] + (["[...]"] if len(lines) > 14 else []) + lines[max(2, len(lines) - 12):]
        print_safe(show, "\n".join(shown))
    print_safe(show, "")
    print_summary(task, outcome)
    return exit_code(outcome)


@contextmanager
def packaged_task(name: str) -> Iterator[Path]:
    """The task `name` shipped in harness/data/tasks, copied to a temporary folder removed on exit.

    Raises:
        TaskError: the package holds no task of that name.
    """
    source = resources.files("harness").joinpath("data", "tasks", name)
    if not source.is_dir():
        raise TaskError(f"the package holds no task {name!r} under harness/data/tasks; "
                        f"pass a task folder instead, e.g. --task tasks/{DEMO_TASK}")
    with tempfile.TemporaryDirectory(prefix="harness-demo-") as tmp:
        copy_tree(source, Path(tmp) / name)
        yield Path(tmp) / name


def copy_tree(source: Traversable, dest: Path) -> None:
    """Copy a package resource folder to `dest`, leaving out byte-code an installer compiled."""
    dest.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.name in SKIP_NAMES or item.name.endswith(SKIP_SUFFIXES):
            continue
        if item.is_dir():
            copy_tree(item, dest / item.name)
        else:
            (dest / item.name).write_bytes(item.read_bytes())


def steps(trajectory: Path, width: int = 100) -> str:
    """One line per model remark and per tool call with the first line of its result."""
    def short(text: str) -> str:
        line = text.strip().splitlines()[0] if text.strip() else ""
        return line if len(line) <= width else line[: width - 3] + "..."

    def result(content: str, name: str) -> str:
        lines = [x for x in content.strip().splitlines() if x.strip()]
        tail = f" ... {short(lines[-1])}" if name == "bash" and len(lines) > 1 else ""
        return short(content) + tail

    out: list[str] = []
    names: dict[str, str] = {}
    turn = 0
    for m in load_trajectory(trajectory):
        if m.role == "assistant":
            turn += 1
            if m.text.strip():
                out.append(f"{turn:>3}. {short(m.text)}")
            for c in m.tool_uses:
                names[c.id] = c.name
                out.append(f"     -> {escape_ident(c.name)} {short(json.dumps(c.input, ensure_ascii=False))}")
        elif m.role == "user" and m.tool_results:
            out.extend(f"     <- {'ERROR ' if r.is_error else ''}{result(r.content, names.get(r.tool_use_id, ''))}"
                       for r in m.tool_results)
    return "\n".join(out)

"""Repair tasks: a directory with the project's files, a problem statement and how to test it.

Layout of a task directory::

    tasks/<id>/
      task.json      {"id", "python", "test_cmd", "FAIL_TO_PASS", "PASS_TO_PASS", "requirements", ...}
      problem.md     the problem statement, as a user would report it
      repo/          the project's files at the base state
      gold.patch     optional: a reference fix (unified diff against repo/)
      test.patch     optional: tests applied at grading time only
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import TaskError


@dataclass(frozen=True)
class Task:
    id: str
    problem_statement: str
    repo_dir: Path
    test_cmd: str | None = None
    python: str = "3.11"
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()
    install_cmd: str | None = None
    gold_patch: str | None = None
    test_patch: str | None = None
    extra: dict[str, object] = field(default_factory=dict)


def load_task(path: Path) -> Task:
    path = Path(path)
    meta_file = path / "task.json"
    if not meta_file.is_file():
        raise TaskError(f"{path} is not a task directory: {meta_file} is missing; a task directory "
                        "holds task.json, problem.md and repo/ (see tasks/wordcount)")
    try:
        meta = json.loads(meta_file.read_text())
    except json.JSONDecodeError as exc:
        raise TaskError(f"{meta_file} is not valid JSON: {exc}") from exc
    problem = path / "problem.md"
    repo = path / "repo"
    if not problem.is_file() or not repo.is_dir():
        raise TaskError(f"{path} needs problem.md and a repo/ folder (see tasks/wordcount)")

    def optional(name: str) -> str | None:
        f = path / name
        return f.read_text() if f.is_file() else None

    return Task(id=str(meta.get("id", path.name)), problem_statement=problem.read_text(),
                repo_dir=repo, test_cmd=meta.get("test_cmd"), python=str(meta.get("python", "3.11")),
                fail_to_pass=tuple(meta.get("FAIL_TO_PASS", ())),
                pass_to_pass=tuple(meta.get("PASS_TO_PASS", ())),
                requirements=tuple(meta.get("requirements", ())), install_cmd=meta.get("install_cmd"),
                gold_patch=optional("gold.patch"), test_patch=optional("test.patch"))

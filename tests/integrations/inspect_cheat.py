"""An Inspect task for tests/integrations/test_inspect_suite.py: the suite's wordcount sample with a solver that
cheats, rewriting the task's test file so that every required test passes without fixing anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inspect_ai import Task, task, task_with
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import sandbox

from harness.integrations.inspect_suite import task_suite

WORDCOUNT = Path(__file__).resolve().parents[2] / "tasks" / "wordcount"
NAMES = ("test_count_words_ignores_case", "test_top_words_returns_n_items", "test_top_words_breaks_ties_alphabetically",
         "test_count_words_accented_letters")


@solver
def rewrite_tests() -> Any:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        await sandbox().write_file("tests/test_core.py", "".join(f"def {name}():\n    pass\n\n" for name in NAMES))
        return state
    return solve


@task
def cheating() -> Task:
    return task_with(task_suite(tasks=str(WORDCOUNT)), solver=rewrite_tests())

"""The harness's task folders as an Inspect AI task, each sample in its own `harness` sandbox
(`pip install 'harness[inspect]'`):

    inspect eval harness/task_suite --model anthropic/claude-sonnet-4-5          # Inspect's ReAct agent, bash
    inspect eval harness/task_suite -T tasks=tasks --solver harness/reference_patch -S patch=gold \\
        --model mockllm/model                                                    # the gold patches: all correct

    task_suite(tasks="tasks")    one Sample per task folder below `tasks` (task.json), its sandbox
                                 ("harness", FOLDER): the task's image with its requirements installed, the
                                 files at /workspace; the input is the problem statement
    reference_patch(patch)       a scripted solver: applies the task's gold patch ("gold") or nothing ("empty"),
                                 the two reference answers `harness eval --model gold|empty` gives
    task_tests()                 the scorer: the task's tests in the sample's sandbox, judged as `harness eval`
                                 judges them (FAIL_TO_PASS and PASS_TO_PASS by the task's log parser)

The scorer first puts back the starting version of every test file (those the task's test patch touches and
those its test ids name, read from the task folder on the host), then applies the test patch, then runs
`test_cmd` with its output in a file: an agent that edited the tests cannot bend them, as in grading.

Registered with Inspect through the provider's entry point (`harness.integrations.inspect_provider`
imports this module), so the names above resolve as `harness/task_suite`, `harness/reference_patch`
and `harness/task_tests` once the harness is installed.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Literal

from inspect_ai import Task, task
from inspect_ai.agent import react
from inspect_ai.dataset import Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer, stderr
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.tool import bash
from inspect_ai.util import sandbox

from harness import checks
from harness.core import Task as HarnessTask
from harness.core import find_task_dirs, load_task, patched_files
from harness.errors import ConfigError
from harness.evaluation import judge, parse_log

STAGE = "/tmp/harness/inspect-grading"
"""Where the scorer keeps the test patch and the test output inside the sandbox."""

PROMPT = """The project is in the current directory (/workspace); its tests run with `{test_cmd}`.
Make the change the issue below asks for, in the project's files, without changing its tests.

<issue>
{problem}
</issue>"""


@task
def task_suite(tasks: str = "tasks", test_timeout: int = 900, message_limit: int = 60) -> Task:
    """Every task folder below `tasks` (a task folder itself, or a folder of them) as one sample."""
    dirs = find_task_dirs([Path(tasks).expanduser()])
    if not dirs:
        raise ConfigError(f"no task folder (holding task.json) below {tasks!r}; expected a folder of task "
                          "folders such as the harness checkout's tasks/, e.g. -T tasks=tasks")
    samples = [_sample(folder) for folder in dirs]
    return Task(dataset=samples, solver=react(tools=[bash(timeout=180)]), scorer=task_tests(test_timeout),
                message_limit=message_limit)


def _sample(folder: Path) -> Sample:
    loaded = load_task(folder)
    return Sample(id=loaded.id, input=PROMPT.format(test_cmd=loaded.test_cmd, problem=loaded.problem_statement.strip()),
                  metadata={"task_dir": str(folder.resolve())}, sandbox=("harness", str(folder.resolve())))


def _task(state: TaskState) -> HarnessTask:
    return load_task(Path(str(state.metadata["task_dir"])))


@solver
def reference_patch(patch: Literal["gold", "empty"] = "gold") -> Any:
    """Apply the task's gold patch in the sample's sandbox ("gold"), or change nothing ("empty")."""
    if patch not in ("gold", "empty"):
        raise ConfigError(f"reference_patch: patch={patch!r}; expected \"gold\" or \"empty\", e.g. -S patch=gold")

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        harness_task = _task(state)
        if patch == "gold":
            if not harness_task.gold_patch:
                raise ConfigError(f"task {harness_task.id} has no gold.patch; use -S patch=empty or add one")
            await _apply(harness_task.gold_patch, f"{STAGE}/gold.patch", f"the gold patch of {harness_task.id}")
        return state
    return solve


async def _apply(patch: str, where: str, what: str) -> None:
    box = sandbox()
    await box.write_file(where, patch)
    applied = await box.exec(["git", "apply", "--verbose", "--whitespace=nowarn", where])
    if not applied.success:
        raise RuntimeError(f"{what} does not apply in the sandbox (git apply exit {applied.returncode}): "
                           f"{(applied.stdout + applied.stderr)[-600:]}")


def files_of_tests(harness_task: HarnessTask) -> list[str]:
    """The files the task's tests live in: those its test patch touches and those its test ids name
    (`path::name`), relative to the project's root."""
    named = {test.split("::", 1)[0] for test in (*harness_task.fail_to_pass, *harness_task.pass_to_pass)
             if "::" in test}
    return sorted(named | set(patched_files(harness_task.test_patch or "")))


@scorer(metrics=[accuracy(), stderr()])
def task_tests(timeout: int = 900) -> Any:
    """CORRECT when the task's FAIL_TO_PASS and PASS_TO_PASS tests all pass in the sample's sandbox."""
    async def score(state: TaskState, target: Target) -> Score:
        harness_task = _task(state)
        await _restore_tests(harness_task)
        if harness_task.test_patch:
            await _apply(harness_task.test_patch, f"{STAGE}/test.patch", f"the test patch of {harness_task.id}")
        box = sandbox()
        variables = dict(harness_task.environment.test_env) if harness_task.environment else None
        output_file = f"{STAGE}/test_output.txt"
        script = f"mkdir -p {STAGE} && ( {harness_task.test_cmd} ) > {output_file} 2>&1"
        try:
            run = await box.exec(["bash", "-c", script], env=variables or {}, timeout=timeout)
        except TimeoutError:
            return Score(value=INCORRECT, explanation=f"the tests ran past {timeout} s and were stopped")
        output = await box.read_file(output_file)
        status = parse_log(harness_task.log_parser, output)
        verdict = judge(status, harness_task.fail_to_pass, harness_task.pass_to_pass)
        resolved = bool(status) and verdict.resolved
        failed = [*verdict.fail_to_pass_failure, *verdict.pass_to_pass_failure]
        found = "no test result in the log" if not status else f"failing: {failed}" if failed else "all pass"
        why = f"{verdict.resolution} (the tests exited {run.returncode}); required tests: {found}"
        return Score(value=CORRECT if resolved else INCORRECT, explanation=why,
                     metadata={"tests_status": verdict.to_dict(), "exit_code": run.returncode,
                               "output_tail": output[-2000:]})
    return score


async def _restore_tests(harness_task: HarnessTask) -> None:
    """Each test file back at its starting version (read from the task folder, no link followed), or
    removed when the task does not start with it."""
    box = sandbox()
    missing = []
    for rel in files_of_tests(harness_task):
        try:
            data = checks.read_beneath(harness_task.repo_dir, rel)
        except FileNotFoundError:
            missing.append(rel)
            continue
        await box.write_file(rel, data)
    if missing:
        await box.exec(["bash", "-c", "rm -f -- " + " ".join(shlex.quote(rel) for rel in missing)])


__all__ = ["files_of_tests", "reference_patch", "task_suite", "task_tests"]

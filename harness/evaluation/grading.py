"""Grading one patch: in a fresh sandbox on the task's environment image, never the agent's.

Steps: copy the project at its base state to a scratch folder on the host; apply the model patch
(a patch that does not apply is reported as such, with what git/patch said); put back the base
version of every file the test patch touches (so a model that edited the tests cannot block or
bend them, as SWE-bench's eval script does with `git checkout <base> -- <test files>`) and apply
the test patch; start a new sandbox with that tree; run `test_cmd` with its output in a file; parse
the per-test results; judge FAIL_TO_PASS / PASS_TO_PASS. With `runs` > 1 the tests run again in a
new sandbox each time, and an instance whose verdicts differ is flagged flaky (and counts as
resolved only if every run resolved it).
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.evaluation.sources import apply_patch, patched_files
from harness.evaluation.tasks import Task
from harness.evaluation.testlog import TestsVerdict, judge, parse_pytest_log
from sandbox.api import SandboxSpec

OUTPUT_FILE = "/tmp/harness/test_output.txt"


class TaskDefect(Exception):
    """The task itself is broken (its test patch does not apply to its base state)."""


@dataclass(frozen=True)
class TestRun:
    __test__ = False      # not a pytest test class

    exit_code: int
    duration: float
    timed_out: bool
    status: dict[str, str]
    verdict: TestsVerdict
    output: str


@dataclass
class Grade:
    patch_exists: bool
    patch_applied: bool = False
    patch_output: str = ""
    runs: list[TestRun] = field(default_factory=list)

    @property
    def resolved(self) -> bool:
        return self.patch_applied and bool(self.runs) and all(r.verdict.resolved and not r.timed_out
                                                              for r in self.runs)

    @property
    def flaky(self) -> bool:
        return len({(r.verdict.resolved, r.timed_out) for r in self.runs}) > 1

    @property
    def test_seconds(self) -> float:
        return sum(r.duration for r in self.runs)

    def report(self, instance_id: str) -> dict[str, Any]:
        """SWE-bench's per-instance report.json shape, plus our grading details."""
        entry: dict[str, Any] = {"patch_is_None": not self.patch_exists, "patch_exists": self.patch_exists,
                                 "patch_successfully_applied": self.patch_applied, "resolved": self.resolved}
        if self.runs:
            entry["tests_status"] = self.runs[0].verdict.to_dict()
            entry["runs"] = [{"resolved": r.verdict.resolved, "exit_code": r.exit_code, "timed_out": r.timed_out,
                              "duration": round(r.duration, 3)} for r in self.runs]
            entry["flaky"] = self.flaky
        return {instance_id: entry}


def prepare_tree(task: Task, model_patch: str, dest: Path, grade: Grade) -> bool:
    """Fill `dest` with the base state, the model patch and the test patch; False if the patch failed."""
    shutil.copytree(task.repo_dir, dest, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    outcome = apply_patch(dest, model_patch)
    grade.patch_output = outcome.output
    if not outcome.applied:
        return False
    grade.patch_applied = True
    if task.test_patch:
        for rel in patched_files(task.test_patch):
            target, base = dest / rel, task.repo_dir / rel
            if target.is_file() or target.is_symlink():
                target.unlink()
            if base.is_file():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(base, target, follow_symlinks=False)
        applied = apply_patch(dest, task.test_patch)
        if not applied.applied:
            raise TaskDefect(f"the test patch of {task.id} does not apply to its base state: "
                             f"{applied.output[-600:]}; check it with `harness tasks check`")
    return True


def grade_patch(task: Task, model_patch: str | None, image: str, *, runs: int = 1, timeout: float = 900.0,
                labels: dict[str, str] | None = None) -> Grade:
    """Grade `model_patch` for `task` in fresh sandboxes on `image`.

    Raises:
        TaskDefect: the task's own test patch does not apply.
        sandbox.errors.SandboxError: Docker failed (an infrastructure error).
    """
    grade = Grade(patch_exists=model_patch is not None)
    with tempfile.TemporaryDirectory(prefix=f"harness-grade-{task.id}-") as tmp:
        tree = Path(tmp) / "project"
        if not prepare_tree(task, model_patch or "", tree, grade):
            return grade
        for _ in range(max(1, runs)):
            grade.runs.append(run_tests(task, tree, image, timeout, labels or {}))
    return grade


def run_tests(task: Task, tree: Path, image: str, timeout: float, labels: dict[str, str]) -> TestRun:
    """Run the task's tests once, in a new sandbox holding `tree`."""
    from sandbox.docker_sandbox import DockerSandbox
    spec = SandboxSpec(image=image, session=f"grade-{task.id}-{uuid.uuid4().hex[:6]}", project_dir=tree,
                       labels={"harness.kind": "grading", **labels})
    with DockerSandbox(spec) as box:
        result = box.exec(f"( {task.test_cmd} ) > {OUTPUT_FILE} 2>&1", timeout=timeout, save_output=False)
        try:
            output = box.read_file(OUTPUT_FILE).data.decode("utf-8", errors="replace")
        except FileNotFoundError:
            output = result.stdout.text + result.stderr.text
    status = parse_pytest_log(output)
    return TestRun(exit_code=result.exit_code, duration=result.duration, timed_out=result.timed_out,
                   status=status, verdict=judge(status, task.fail_to_pass, task.pass_to_pass), output=output)

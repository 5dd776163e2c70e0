"""Grading one patch: in a fresh sandbox on the task's environment image, never the agent's.

The model patch is hostile (it may hold links to host folders, `..` paths, a file where a folder
was), so no patch is ever applied on the host. Each run starts a new network-less sandbox holding
only the pristine base tree and does everything there:

1. record the base version of the files the test patch touches in a git baseline whose GIT_DIR is
   outside /workspace (only those: hashing a django-sized tree would cost seconds per run);
2. apply the model patch as SWE-bench 5.0 does (`harness.patching`: `git apply --verbose`, `--3way`,
   `--reject`, `patch --batch --forward --fuzz=5`, the tree put back between them, then
   `git apply --check --reverse`); one that does not apply is reported as such, with what each command
   said, and the command that applied it is recorded (a half-applied tree only ever exists in that
   throwaway container);
3. put back the base version of every file the test patch touches, removing any link or file the
   model put in the way (SWE-bench's `git checkout <base> -- <test files>`), so a model that edited
   the tests cannot block or bend them, and apply the test patch (a test patch that does not apply
   is a `TaskDefect`);
4. run `test_cmd` with its output in a file and its exit status from Docker (never from the output),
   parse the per-test results, reject a log that does not describe a run of the suite
   (`testlog.guard`: no runner summary, an exit status the log contradicts), judge FAIL_TO_PASS /
   PASS_TO_PASS. A SWE-bench 5.0 row's own eval script runs there instead of `test_cmd`, up to its end
   marker and behind `container_scripts/eval_compat.sh` (`eval_scripts`); only its log between the
   markers is parsed.

With `runs` > 1 every run repeats all steps in a new sandbox, and an instance whose verdicts differ is
flagged flaky (and counts as resolved only if every run resolved it).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field

from harness.agent.assembly import task_spec
from harness.container_scripts import script_text
from harness.core.records import InstanceReport
from harness.core.sources import GIT_IDENTITY, patched_files
from harness.core.task import Task
from harness.evaluation.eval_scripts import EvalScript, script_of, tests_part
from harness.evaluation.log_parsers import parse_log
from harness.evaluation.testlog import Rejection, TestsVerdict, guard, judge, script_stopped
from harness.patching import STAGE_DIR, ChainOutcome, apply_in_sandbox
from sandbox.api import WORKDIR, Limits, Sandbox, SandboxSpec
from sandbox.errors import SandboxError
from sandbox.factory import open_sandbox
from sandbox.pool import SandboxPool

OUTPUT_FILE = "/tmp/harness/test_output.txt"
_BASELINE_ENV = {"GIT_DIR": f"{STAGE_DIR}/base.git", "GIT_WORK_TREE": WORKDIR, "GIT_LITERAL_PATHSPECS": "1",
                 **GIT_IDENTITY}

# Shipped scripts (harness/container_scripts/) run inside the grading sandbox: before the model patch,
# the record of the base version of the test files; after it, their restore (what stands in the way removed).
_RECORD = "grading_record.py"
_RESTORE = "grading_restore.py"
# A 5.0 row's eval script runs behind these (its stand-ins for the official image, its base checkout).
_COMPAT = "eval_compat.sh"
_CHECKOUT = "eval_checkout.py"


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
    rejected: Rejection | None = None    # the log does not describe a run of the suite (`testlog.guard`)

    @property
    def resolved(self) -> bool:
        return self.verdict.resolved and not self.timed_out and self.rejected is None


@dataclass
class Grade:
    patch_exists: bool
    patch_applied: bool = False
    patch_output: str = ""
    runs: list[TestRun] = field(default_factory=list)
    patch_command: str | None = None     # the command of the chain that applied the patch

    @property
    def resolved(self) -> bool:
        return self.patch_applied and bool(self.runs) and all(r.resolved for r in self.runs)

    @property
    def rejected(self) -> Rejection | None:
        """The first run's rejection, if any run's log was rejected."""
        return next((r.rejected for r in self.runs if r.rejected is not None), None)

    @property
    def failure_reason(self) -> str | None:
        """Why tests that ran did not resolve it when the cause may not be the patch (SWE-bench 5.0's
        ambiguous tier): a rejected log's reason, or ``tests_timed_out``; None otherwise."""
        if self.resolved or not self.runs:
            return None
        if self.rejected is not None:
            return self.rejected.reason
        return "tests_timed_out" if any(r.timed_out for r in self.runs) else None

    @property
    def flaky(self) -> bool:
        return len({(r.verdict.resolved, r.timed_out, r.rejected is None) for r in self.runs}) > 1

    @property
    def test_seconds(self) -> float:
        return sum(r.duration for r in self.runs)

    def report(self, instance_id: str) -> InstanceReport:
        """SWE-bench's per-instance report.json shape, plus our grading details."""
        graded = bool(self.runs)
        return InstanceReport(
            instance_id=instance_id, patch_is_None=not self.patch_exists, patch_exists=self.patch_exists,
            patch_successfully_applied=self.patch_applied, resolved=self.resolved,
            patch_applied_with=self.patch_command,
            tests_status=self.runs[0].verdict.to_dict() if graded else None,
            tests_rejected=self.rejected.to_dict() if graded and self.rejected is not None else None,
            runs=[{"resolved": r.resolved, "exit_code": r.exit_code, "timed_out": r.timed_out,
                   "duration": round(r.duration, 3),
                   "rejected": r.rejected.reason if r.rejected is not None else None}
                  for r in self.runs] if graded else None,
            flaky=self.flaky if graded else None)


def grade_patch(task: Task, model_patch: str | None, image: str, *, runs: int = 1, timeout: float = 900.0,
                labels: dict[str, str] | None = None, sandboxes: SandboxPool | None = None) -> Grade:
    """Grade `model_patch` for `task` in fresh sandboxes on `image`, one per run (taken from `sandboxes`,
    a warm pool, when given: each still fresh, used once).

    Raises:
        TaskDefect: the task's own test patch does not apply.
        sandbox.errors.SandboxError: Docker failed (an infrastructure error).
    """
    grade = Grade(patch_exists=model_patch is not None)
    for number in range(max(1, runs)):
        with open_sandbox(grading_spec(task, image, labels), sandboxes) as box:
            outcome = prepare_tree(box, task, model_patch or "")
            if number == 0:
                grade.patch_output, grade.patch_applied = outcome.output, outcome.applied
                grade.patch_command = outcome.command
            if not outcome.applied:
                return grade
            grade.runs.append(run_graded_tests(box, task, timeout, image))
    return grade


def grading_spec(task: Task, image: str, labels: dict[str, str] | None = None) -> SandboxSpec:
    """The fresh sandbox one grading run of `task` takes place in."""
    # the official harness does not limit the test container's CPUs; where a spec says its tests need
    # several (pylint skips its multiprocessing tests on one), the grading sandbox gets them, up to the host's
    wanted = task.environment.cpus if task.environment is not None else None
    limits = Limits(cpus=float(max(1, min(wanted, os.cpu_count() or 1)))) if wanted else Limits()
    return task_spec(task, image, limits, "grading", f"grade-{task.id}-{uuid.uuid4().hex[:6]}", labels)


def prepare_tree(box: Sandbox, task: Task, model_patch: str) -> ChainOutcome:
    """Turn the base tree in `box` into base + model patch + base tests + test patch.

    Returns the model patch's outcome; when it did not apply, the tree is left as it is.

    Raises:
        TaskDefect: the test patch does not apply once the test files are back at their base version.
    """
    if task.test_patch:
        box.exec(f"mkdir -p {STAGE_DIR}", timeout=30, save_output=False)
        box.write_file(f"{STAGE_DIR}/test_files.json", json.dumps(patched_files(task.test_patch)).encode())
        box.write_file(f"{STAGE_DIR}/record.py", script_text(_RECORD).encode())
        box.write_file(f"{STAGE_DIR}/restore.py", script_text(_RESTORE).encode())
        _in_box(box, f"python3 {STAGE_DIR}/record.py {STAGE_DIR}/test_files.json",
                "record the base version of the test files", _BASELINE_ENV)
    outcome = apply_in_sandbox(box, model_patch, "model")
    if not outcome.applied or not task.test_patch:
        return outcome
    _in_box(box, f"python3 {STAGE_DIR}/restore.py {STAGE_DIR}/test_files.json",
            "put the base version of the test files back", _BASELINE_ENV)
    applied = apply_in_sandbox(box, task.test_patch, "test")
    if not applied.applied:
        raise TaskDefect(f"the test patch of {task.id} does not apply to its base state: "
                         f"{applied.output[-600:]}; check it with `harness tasks check`")
    return outcome


def _in_box(box: Sandbox, command: str, what: str, env: dict[str, str]) -> None:
    result = box.exec(command, timeout=600, env=env, save_output=False)
    if not result.ok:
        raise SandboxError(f"grading could not {what} in sandbox {box.session} (exit {result.exit_code}): "
                           f"{(result.stdout.text + result.stderr.text).strip()[-600:]}; the environment "
                           "image needs git and python3 (the sandbox image has both)")


def run_graded_tests(box: Sandbox, task: Task, timeout: float, image: str = "") -> TestRun:
    """Run the task's tests once in `box` (output in OUTPUT_FILE) and judge them against the task's lists:
    its `test_cmd`, or its row's own eval script (`eval_scripts`); `image` is the sandbox's, for the log."""
    variables = dict(task.environment.test_env) if task.environment else {}
    script = script_of(task)
    command = task.test_cmd if script is None else _stage_script(box, task, script, image, variables)
    result = box.exec(f"( {command} ) > {OUTPUT_FILE} 2>&1", timeout=timeout, env=variables or None,
                      save_output=False)
    try:
        output = box.read_file(OUTPUT_FILE).data.decode("utf-8", errors="replace")
    except FileNotFoundError:
        output = result.stdout.text + result.stderr.text
    graded = output if script is None else tests_part(output)
    if graded is None:      # the row's script ended before its test command
        return TestRun(exit_code=result.exit_code, duration=result.duration, timed_out=result.timed_out, status={},
                       verdict=judge({}, task.fail_to_pass, task.pass_to_pass), output=output,
                       rejected=None if result.timed_out else script_stopped(result.exit_code))
    status = parse_log(task.log_parser, graded)
    if not status and script is not None:     # 5.0: results printed outside the markers still count
        graded, status = output, parse_log(task.log_parser, output)
    rejected = None if result.timed_out else guard(task.log_parser, graded, status, result.exit_code)
    return TestRun(exit_code=result.exit_code, duration=result.duration, timed_out=result.timed_out,
                   status=status, verdict=judge(status, task.fail_to_pass, task.pass_to_pass), output=output,
                   rejected=rejected)


def _stage_script(box: Sandbox, task: Task, script: EvalScript, image: str, variables: dict[str, str]) -> str:
    """Write the row's eval script (up to its end marker, behind the stand-ins) and its checkout helper into
    the sandbox; `variables` gains what the stand-ins read. Returns the command that runs it."""
    box.write_file(f"{STAGE_DIR}/eval.sh", (script_text(_COMPAT) + "\n" + script.until_tests_end()).encode())
    box.write_file(f"{STAGE_DIR}/{_CHECKOUT}", script_text(_CHECKOUT).encode())
    base = task.extra.get("base_commit")
    variables.update({"HARNESS_STAGE": STAGE_DIR, "HARNESS_WORKDIR": WORKDIR, "HARNESS_IMAGE": image,
                      "HARNESS_BASE_COMMIT": base if isinstance(base, str) else "",
                      "HARNESS_ROW_IMAGE": script.image or ""})
    return f"bash {STAGE_DIR}/eval.sh"

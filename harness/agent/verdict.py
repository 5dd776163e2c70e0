"""A session's verdict: the task's tests on an attempt's patch, in a fresh sandbox, never the agent's.

    spec = verdict_spec(task, config, image, labels)     # the session's image, files and limits, a new name
    ahead = StartedAhead(spec, sandboxes)                # started in a thread while the agent works
    verdict = fresh_verdict(task, patch, config, spec, ahead=ahead)
    ahead.discard()                                      # removes it when it was never taken

The verdict's sandbox holds the starting files only, the patch is applied there as grading applies it
(`harness.patching`), and the task's test command runs; nothing of the agent's reaches that container.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from harness.agent.assembly import new_session_name, task_spec
from harness.agent.workspace import run_task_tests
from harness.config import Config
from harness.core.task import Task
from harness.patching import apply_in_sandbox
from sandbox.api import ExecResult, SandboxSpec
from sandbox.docker_sandbox import DockerSandbox
from sandbox.factory import SandboxSource, open_sandbox


@dataclass(frozen=True)
class Verdict:
    """The task's tests on the attempt's patch, taken as `harness eval` takes them: in a fresh sandbox
    holding only the starting files with the patch applied, never in the agent's own (where a process
    the agent left could change the tree or the test run after the patch was computed)."""

    sandbox: str                # the session name of the sandbox the tests ran in
    patch_applied: bool
    patch_output: str           # what git apply / patch said
    tests: ExecResult | None    # None when the patch did not apply
    seconds: float              # the sandbox's start, the copy, the patch and the tests

    @property
    def passed(self) -> bool:
        return self.patch_applied and self.tests is not None and self.tests.ok

    @property
    def exit_code(self) -> int | None:
        return self.tests.exit_code if self.tests is not None else None

    def output(self, limit: int) -> str:
        """The end of the test output, or what the patch tools said when it did not apply."""
        if self.tests is None:
            return f"the patch did not apply to the starting files:\n{self.patch_output[-limit:]}"
        return tail(self.tests, limit)

    def record(self, task: Task) -> str:
        """tests.txt: where the tests ran, the command, its exit code and the end of its output."""
        return (f"# in a fresh sandbox ({self.sandbox}) holding the starting files and the patch\n"
                f"$ {task.test_cmd}\n[exit {self.exit_code if self.exit_code is not None else 'none'}]\n"
                f"{self.output(100_000)}\n")

    def to_dict(self) -> dict[str, Any]:
        return {"where": "fresh sandbox: the starting files and the patch", "sandbox": self.sandbox,
                "patch_applied": self.patch_applied, "exit_code": self.exit_code, "passed": self.passed,
                "seconds": round(self.seconds, 3)}


def tail(result: ExecResult, limit: int) -> str:
    """The end of a command's output (stdout, then stderr), at most `limit` characters."""
    text = (result.stdout.text + ("\n" + result.stderr.text if result.stderr.text.strip() else "")).strip()
    return text if len(text) <= limit else "[...]\n" + text[-limit:]


def session_spec(task: Task, config: Config, image: str, labels: Mapping[str, str]) -> SandboxSpec:
    """The sandbox one attempt of `task` runs in (a new session name each time)."""
    return task_spec(task, image, config.sandbox.limits, "session", new_session_name(task.id), labels)


def verdict_spec(task: Task, config: Config, image: str, labels: Mapping[str, str]) -> SandboxSpec:
    """The fresh sandbox an attempt's tests run in: the session's image, files and limits, a new name."""
    spec = session_spec(task, config, image, labels)
    return dataclasses.replace(spec, session=f"verdict-{spec.session}",
                               labels={**spec.labels, "harness.kind": "verdict"})


def fresh_verdict(task: Task, patch: str, config: Config, spec: SandboxSpec,
                  sandboxes: SandboxSource | None = None, *, ahead: StartedAhead | None = None) -> Verdict:
    """Start `spec`'s sandbox (the starting files only), or take it from `ahead` (started while the agent
    worked), apply `patch` there as grading does, run the task's test command, and remove the sandbox.

    Raises:
        SandboxError: Docker failed (an infrastructure error, not a failing test).
    """
    started = time.monotonic()
    with (ahead.take() if ahead is not None else open_sandbox(spec, sandboxes)) as box:
        applied = apply_in_sandbox(box, patch, "session")
        tests = run_task_tests(box, task, config) if applied.applied else None
    return Verdict(box.session, applied.applied, applied.output, tests, time.monotonic() - started)


class StartedAhead:
    """A sandbox started in a thread while the caller goes on (the verdict's, while the agent works: it
    holds the starting files only, and nothing of the agent's reaches another container). `take()`
    waits for it and hands it over, or raises what its start raised; `discard()` removes it if it was
    never taken."""

    def __init__(self, spec: SandboxSpec, sandboxes: SandboxSource | None = None) -> None:
        self._future: Future[DockerSandbox] = Future()
        self._taken = False
        threading.Thread(target=self._start, args=(spec, sandboxes), name=f"start-{spec.session}",
                         daemon=True).start()

    def _start(self, spec: SandboxSpec, sandboxes: SandboxSource | None) -> None:
        try:
            self._future.set_result(open_sandbox(spec, sandboxes))
        except BaseException as exc:  # noqa: BLE001 - handed to take(), which raises it
            self._future.set_exception(exc)

    def take(self) -> DockerSandbox:
        self._taken = True
        return self._future.result()

    def discard(self) -> None:
        if self._taken:
            return
        self._taken = True
        try:
            box = self._future.result()
        except BaseException:  # noqa: BLE001 - it never started: nothing to remove, the caller's error matters
            return
        box.close()

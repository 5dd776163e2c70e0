"""One repair session: a fresh sandbox holding the task's files, the agent loop, the patch; then the tests,
in another fresh sandbox holding only the starting files and the patch (`fresh_verdict`).

`run_session` writes into `out_dir`: trajectory.jsonl (appended live), patch.diff (the agent's
change as a unified diff against the starting files), tests.txt and result.json (stop reason, turns,
tokens, cost, durations, tests and where they ran, the model and the resolved config; never secrets).
With `attempts` > 1 it is Reflexion (seed 000): while the task's tests fail, the model writes a short
self-critique and a new attempt starts from the original files with the test output and that
critique prepended to the task; the tests are the signal, the model never grades itself. Each attempt keeps its files in
out_dir/attempt-N/ and the last one is copied to the top.

The patch comes from a git baseline made at the start inside the sandbox, in GIT_DIR=/tmp/harness/git
outside /workspace, checked at the end against the tree id and index the host kept (`workspace.sandbox_patch`);
caches are excluded. /workspace itself is a git repository of the agent's, whose
one commit is the starting state, so `git diff` and `git status` work as models expect.

Every file is written through `harness.checks` (0600, in 0700 folders, never through a link), so a
link planted in a reused output folder is refused instead of overwriting what it points to.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from harness import checks
from harness.approval.wiring import outbound_tools_for_session
from harness.config import Config, Secrets
from harness.core.task import Task
from harness.environments import ensure_env_image, sandbox_image
from harness.errors import ModelError
from harness.loop import AgentLoop, LoopResult, StepEvent, StopReason
from harness.messages import Message, TextBlock, system, user
from harness.models.base import Model, Usage
from harness.patching import apply_in_sandbox
from harness.tools.base import ToolContext
from harness.tools.catalog import default_catalog
from harness.tools.retrieval.chunk_cache import shared_cache
from harness.tools.retrieval.code_index import CodeIndex
from harness.tools.retrieval.find_code import warm_index
from harness.trajectory import TrajectoryWriter, read_lines
from harness.workspace import replay, run_task_tests, sandbox_patch, start_baseline
from sandbox.api import ExecResult, Progress, SandboxSpec, quiet
from sandbox.docker_sandbox import DockerSandbox
from sandbox.errors import SandboxUnavailable
from sandbox.pool import SandboxPool, open_sandbox
from sandbox.text import safe_json

SessionProgress = Callable[[StepEvent | str], None]


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
        return _tail(self.tests, limit)

    def record(self, task: Task) -> str:
        """tests.txt: where the tests ran, the command, its exit code and the end of its output."""
        return (f"# in a fresh sandbox ({self.sandbox}) holding the starting files and the patch\n"
                f"$ {task.test_cmd}\n[exit {self.exit_code if self.exit_code is not None else 'none'}]\n"
                f"{self.output(100_000)}\n")

    def to_dict(self) -> dict[str, Any]:
        return {"where": "fresh sandbox: the starting files and the patch", "sandbox": self.sandbox,
                "patch_applied": self.patch_applied, "exit_code": self.exit_code, "passed": self.passed,
                "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class Attempt:
    number: int
    session: str
    loop: LoopResult
    patch: str
    verdict: Verdict | None     # None: the task has no test command
    setup_seconds: float
    tool_specs: list[dict[str, Any]] = field(default_factory=list)
    reflection: str = ""
    unavailable: SandboxUnavailable | None = None
    """The sandbox died during the attempt (stop reason "sandbox_unavailable"): no patch, no verdict."""

    @property
    def tests(self) -> ExecResult | None:
        return self.verdict.tests if self.verdict is not None else None

    @property
    def tests_passed(self) -> bool | None:
        return None if self.verdict is None else self.verdict.passed

    @property
    def test_seconds(self) -> float:
        return self.verdict.seconds if self.verdict is not None else 0.0


@dataclass(frozen=True)
class SessionOutcome:
    stop_reason: StopReason
    turns: int
    usage: Usage
    cost_usd: float | None
    duration: float
    patch: str
    out_dir: Path
    tests_passed: bool | None
    attempts: int
    final_text: str = ""
    model: str = ""
    session: str = ""
    attempt_results: list[Attempt] = field(default_factory=list)


def run_session(task: Task, model: Model, config: Config, out_dir: Path, *, image: str | None = None,
                secrets: Secrets | None = None, progress: SessionProgress | None = None,
                resume_from: Path | None = None, labels: Mapping[str, str] | None = None,
                sandboxes: SandboxPool | None = None) -> SessionOutcome:
    """Run the task with `model` in fresh sandboxes (one per attempt) and write the run's files.

    `resume_from`: a trajectory.jsonl of an earlier run of this task: its non-outbound calls are
    replayed in the new sandbox to rebuild the workspace, then the loop goes on from where it was.
    `sandboxes`: a warm pool the attempts' sandboxes are taken from (each still fresh, used once).
    """
    started = time.monotonic()
    out_dir = checks.private_dir(Path(out_dir))
    image = image or session_image(task, config)
    say = progress or (lambda _event: None)
    attempts: list[Attempt] = []
    notes: list[str] = []
    total = max(1, config.loop.attempts)
    for number in range(1, total + 1):
        where = out_dir if total == 1 else out_dir / f"attempt-{number}"
        say(f"attempt {number}/{total}: starting a sandbox" if total > 1 else "starting a sandbox")
        attempt = _attempt(task, model, config, where, image, number, notes, say,
                           resume_from if number == 1 else None, dict(labels or {}), sandboxes)
        if attempt.tests_passed is False and number < total and attempt.loop.stop_reason != "error":
            attempt = dataclasses.replace(attempt, reflection=_reflect(model, task, attempt, say))
            notes.append(_note(task, attempt))
        attempts.append(attempt)
        if attempt.tests_passed is not False or attempt.loop.stop_reason in ("error", "sandbox_unavailable") \
                or not attempt.reflection:
            break
    if total > 1:
        for name in ("trajectory.jsonl", "patch.diff"):
            checks.write_file(out_dir / name, (out_dir / f"attempt-{len(attempts)}" / name).read_bytes())
    outcome = _outcome(attempts, model, out_dir, time.monotonic() - started)
    write_result(out_dir / "result.json", task, outcome, config, image, resumed_from=resume_from)
    if attempts[-1].unavailable is not None:   # recorded, then an infrastructure failure for the caller
        raise attempts[-1].unavailable
    return outcome


def session_image(task: Task, config: Config, progress: Progress = quiet) -> str:
    """The image a session of `task` runs in: the sandbox image (config.sandbox.image, or the one
    built for the task's Python), plus the task's requirements and install_cmd when it has any (the
    same environment image `harness eval` grades in)."""
    base = sandbox_image(config, task.python or config.sandbox.python, progress, task=task)
    if not task.requirements and not task.install_cmd and task.environment is None:
        return base
    return ensure_env_image(task, base, progress=progress)


def session_spec(task: Task, config: Config, image: str, labels: Mapping[str, str]) -> SandboxSpec:
    """The sandbox one attempt of `task` runs in (a new session name each time)."""
    return SandboxSpec(image=image, session=f"{task.id}-{uuid.uuid4().hex[:8]}", project_dir=task.repo_dir,
                       limits=config.sandbox.limits, labels={"harness.kind": "session", **labels},
                       project_from_image=task.environment is not None)


def verdict_spec(task: Task, config: Config, image: str, labels: Mapping[str, str]) -> SandboxSpec:
    """The fresh sandbox an attempt's tests run in: the session's image, files and limits, a new name."""
    spec = session_spec(task, config, image, labels)
    return dataclasses.replace(spec, session=f"verdict-{spec.session}",
                               labels={**spec.labels, "harness.kind": "verdict"})


def fresh_verdict(task: Task, patch: str, config: Config, spec: SandboxSpec,
                  sandboxes: SandboxPool | None = None, *, ahead: StartedAhead | None = None) -> Verdict:
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

    def __init__(self, spec: SandboxSpec, sandboxes: SandboxPool | None = None) -> None:
        self._future: Future[DockerSandbox] = Future()
        self._taken = False
        threading.Thread(target=self._start, args=(spec, sandboxes), name=f"start-{spec.session}",
                         daemon=True).start()

    def _start(self, spec: SandboxSpec, sandboxes: SandboxPool | None) -> None:
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


def _attempt(task: Task, model: Model, config: Config, where: Path, image: str, number: int,
             notes: list[str], say: SessionProgress, resume_from: Path | None, labels: dict[str, str],
             sandboxes: SandboxPool | None) -> Attempt:
    spec = session_spec(task, config, image, labels)
    session = spec.session
    checks.private_dir(where)
    t0 = time.monotonic()
    index = CodeIndex(cache=shared_cache())
    ahead: StartedAhead | None = None
    if config.tools.prewarm_index:      # from the host's copy, while the sandbox starts and the model reads
        warm_index(index, task.repo_dir, config.tools)
    try:
        with open_sandbox(spec, sandboxes) as box:
            baseline = start_baseline(box)
            if task.test_cmd:   # the verdict's sandbox comes up while the agent works
                verdict_box = verdict_spec(task, config, image, labels)
                ahead = StartedAhead(verdict_box, sandboxes)
            tools, approver = outbound_tools_for_session(config, session, config.approval.mode)
            catalog = default_catalog(config, extra=tools)
            run_dir = where.parent if where.name.startswith("attempt-") else where
            run_dir = resume_from.parent if resume_from else run_dir
            ctx = ToolContext(sandbox=box, session=session, approver=approver, code_index=index,
                              key_scope=f"run:{run_dir.resolve()}")     # outbound keys: the run's, resumes too
            writer = TrajectoryWriter(where / "trajectory.jsonl")
            messages = _start_messages(task, notes, number, resume_from, catalog, ctx, writer, say)
            setup = time.monotonic() - t0
            say("agent running")
            loop = AgentLoop(model, catalog, ctx, config, trajectory=writer, progress=say).run(messages)
            index.stop_warming.set()
            patch, dead = _patch_of(box, baseline, loop)
            checks.write_file(where / "patch.diff", patch)
        verdict = None
        if ahead is not None and dead is None:   # the agent's sandbox is gone, and whatever of the agent's ran there
            say(f"running the tests in a fresh sandbox (the starting files and the patch): {task.test_cmd}")
            verdict = fresh_verdict(task, patch, config, verdict_box, ahead=ahead)
            checks.write_file(where / "tests.txt", verdict.record(task))
    finally:
        index.stop_warming.set()
        if ahead is not None:
            ahead.discard()
    return Attempt(number, session, loop, patch, verdict, setup, catalog.specs(), unavailable=dead)


def _patch_of(box: DockerSandbox, baseline: Any, loop: LoopResult) -> tuple[str, SandboxUnavailable | None]:
    """The attempt's patch, or none and the reason when the loop stopped because the sandbox died."""
    try:
        return sandbox_patch(box, baseline), None
    except SandboxUnavailable as exc:
        if loop.stop_reason != "sandbox_unavailable":
            raise
        return "", exc


def _start_messages(task: Task, notes: list[str], number: int, resume_from: Path | None, catalog: Any,
                    ctx: ToolContext, writer: TrajectoryWriter, say: SessionProgress) -> list[Message]:
    if resume_from is not None:
        lines = read_lines(resume_from)
        messages = [Message.from_dict(d) for d in lines]
        for line, m in zip(lines, messages, strict=False):
            writer.write(m, line.get("meta"))
        say(f"resuming: replaying {sum(len(m.tool_uses) for m in messages)} recorded call(s)")
        replay(messages, catalog, ctx)
        return messages
    text = prompt("task.md", task_id=task.id, problem=task.problem_statement.strip(),
                  tests=f"\nThe project's tests run with: `{task.test_cmd}`\n" if task.test_cmd else "")
    if notes:
        text += prompt("retry.md", number=number, notes="\n".join(notes))
    messages = [system(prompt("system.md")), user(text)]
    writer.write_all(messages)
    return messages


def _reflect(model: Model, task: Task, attempt: Attempt, say: SessionProgress) -> str:
    """The model's self-critique of a failed attempt ("" when the model cannot give one)."""
    assert attempt.verdict is not None
    say("tests failed: asking the model for a self-critique")
    ask = prompt("reflect.md", test_cmd=task.test_cmd, exit_code=attempt.verdict.exit_code,
                 output=attempt.verdict.output(3000))
    messages = list(attempt.loop.messages)
    if messages and messages[-1].role == "user":
        messages[-1] = Message("user", messages[-1].content + (TextBlock(ask),))
    else:
        messages.append(user(ask))
    try:   # the tools are listed because the transcript holds calls; the prompt asks for none
        return model.respond(messages, attempt.tool_specs).message.text.strip()
    except ModelError as exc:
        say(f"no self-critique: {exc}")
        return ""


def _note(task: Task, attempt: Attempt) -> str:
    assert attempt.verdict is not None
    return (f"\n### Attempt {attempt.number}: tests failed (exit code {attempt.verdict.exit_code})\n\n"
            f"End of the test output:\n\n```\n{attempt.verdict.output(2000)}\n```\n\n"
            f"Your self-critique after that attempt:\n\n{attempt.reflection}\n")


def _tail(result: ExecResult, limit: int) -> str:
    text = (result.stdout.text + ("\n" + result.stderr.text if result.stderr.text.strip() else "")).strip()
    return text if len(text) <= limit else "[...]\n" + text[-limit:]


def _outcome(attempts: list[Attempt], model: Model, out_dir: Path, duration: float) -> SessionOutcome:
    last = attempts[-1]
    usage = Usage()
    for a in attempts:
        usage = usage + a.loop.usage
    costs = [a.loop.cost_usd for a in attempts]
    return SessionOutcome(stop_reason=last.loop.stop_reason, turns=sum(a.loop.turns for a in attempts),
                          usage=usage, cost_usd=None if None in costs else sum(c or 0.0 for c in costs),
                          duration=duration, patch=last.patch, out_dir=out_dir, tests_passed=last.tests_passed,
                          attempts=len(attempts), final_text=last.loop.final_text, model=model.name,
                          session=last.session, attempt_results=attempts)


def prompt(name: str, **values: Any) -> str:
    """A prompt shipped in harness/data/prompts, filled with `values`."""
    text = (resources.files("harness") / "data" / "prompts" / name).read_text(encoding="utf-8")
    return text.format(**values) if values else text


def write_result(path: Path, task: Task, outcome: SessionOutcome, config: Config, image: str, *,
                 resumed_from: Path | None = None) -> None:
    """result.json: what happened, measured, with the resolved config (secrets are not in Config)."""
    def usage(u: Usage) -> dict[str, int]:
        return dataclasses.asdict(u)

    data = {
        "task": task.id, "model": outcome.model, "stop_reason": outcome.stop_reason,
        "finished": outcome.stop_reason == "end", "final_text": outcome.final_text, "turns": outcome.turns,
        "usage": usage(outcome.usage), "cost_usd": outcome.cost_usd, "tests_passed": outcome.tests_passed,
        "tests_where": _where(outcome),
        "test_cmd": task.test_cmd,
        "patch_files": sum(1 for line in outcome.patch.splitlines() if line.startswith("diff --git ")),
        "durations": {"total": round(outcome.duration, 3)}, "session": outcome.session, "image": image,
        "attempts": [_attempt_record(a) for a in outcome.attempt_results],
        "resumed_from": str(resumed_from) if resumed_from else None,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": config.to_dict(),
    }
    checks.write_file(path, safe_json(data, indent=2) + "\n")


def _where(outcome: SessionOutcome) -> str | None:
    """Where the verdict came from: the last attempt's fresh sandbox (None: no tests)."""
    last = outcome.attempt_results[-1].verdict if outcome.attempt_results else None
    return f"fresh sandbox {last.sandbox}: the starting files and the patch" if last is not None else None


def _attempt_record(a: Attempt) -> dict[str, Any]:
    return {"number": a.number, "session": a.session, "stop_reason": a.loop.stop_reason, "turns": a.loop.turns,
            "usage": dataclasses.asdict(a.loop.usage), "cost_usd": a.loop.cost_usd,
            "tests_passed": a.tests_passed, "tests_exit_code": a.tests.exit_code if a.tests else None,
            "verdict": a.verdict.to_dict() if a.verdict is not None else None,
            "reflection": a.reflection or None,
            "durations": {"setup": round(a.setup_seconds, 3), "model": round(a.loop.model_seconds, 3),
                          "tools": round(a.loop.tool_seconds, 3), "loop": round(a.loop.wall_seconds, 3),
                          "tests": round(a.test_seconds, 3)}}

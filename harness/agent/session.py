"""One repair session: a fresh sandbox holding the task's files, the agent loop, the patch; then the tests,
in another fresh sandbox holding only the starting files and the patch (`harness.agent.verdict`).

Each attempt's workspace (sandbox, baseline, catalog, context) comes from `harness.agent.assembly.open_workspace`,
the one assembly every kind of session uses.

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
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from harness import checks
from harness.agent.assembly import Workspace, open_workspace, session_image
from harness.agent.loop import AgentLoop, LoopResult, StepEvent, StopReason
from harness.agent.trajectory import TrajectoryWriter, read_lines
from harness.agent.verdict import StartedAhead, Verdict, fresh_verdict, session_spec, verdict_spec
from harness.agent.workspace import replay
from harness.approval.wiring import make_gate
from harness.config import Config, Secrets
from harness.core.records import SessionResult
from harness.core.task import Task
from harness.errors import ModelError
from harness.messages import Message, TextBlock, system, user
from harness.models.base import Model, Usage
from harness.outputs import write_session_result
from harness.tools.retrieval.chunk_cache import shared_cache
from harness.tools.retrieval.code_index import CodeIndex
from harness.tools.retrieval.find_code import warm_index
from sandbox.api import ExecResult
from sandbox.errors import SandboxUnavailable
from sandbox.pool import SandboxPool

__all__ = ["Attempt", "SessionOutcome", "SessionProgress", "StartedAhead", "Verdict", "fresh_verdict", "prompt",
           "run_session", "session_image", "session_spec", "verdict_spec", "write_result"]

SessionProgress = Callable[[StepEvent | str], None]


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


def _attempt(task: Task, model: Model, config: Config, where: Path, image: str, number: int,
             notes: list[str], say: SessionProgress, resume_from: Path | None, labels: dict[str, str],
             sandboxes: SandboxPool | None) -> Attempt:
    spec = session_spec(task, config, image, labels)
    checks.private_dir(where)
    t0 = time.monotonic()
    index = CodeIndex(cache=shared_cache())
    ahead: StartedAhead | None = None
    if config.tools.prewarm_index:      # from the host's copy, while the sandbox starts and the model reads
        warm_index(index, task.repo_dir, config.tools)
    run_dir = where.parent if where.name.startswith("attempt-") else where
    run_dir = resume_from.parent if resume_from else run_dir
    try:
        with open_workspace(spec, config, make_gate(config, config.approval.mode), pool=sandboxes, code_index=index,
                            key_scope=f"run:{run_dir.resolve()}") as workspace:   # outbound keys: the run's
            if task.test_cmd:   # the verdict's sandbox comes up while the agent works
                verdict_box = verdict_spec(task, config, image, labels)
                ahead = StartedAhead(verdict_box, sandboxes)
            writer = TrajectoryWriter(where / "trajectory.jsonl")
            messages = _start_messages(task, notes, number, resume_from, workspace, writer, say)
            setup = time.monotonic() - t0
            say("agent running")
            loop = AgentLoop(model, workspace.catalog, workspace.context, config, trajectory=writer,
                             progress=say).run(messages)
            index.stop_warming.set()     # waited for in `finally`, once the verdict has started
            patch, dead = _patch_of(workspace, loop)
            checks.write_file(where / "patch.diff", patch)
        verdict = None
        if ahead is not None and dead is None:   # the agent's sandbox is gone, and whatever of the agent's ran there
            say(f"running the tests in a fresh sandbox (the starting files and the patch): {task.test_cmd}")
            verdict = fresh_verdict(task, patch, config, verdict_box, ahead=ahead)
            checks.write_file(where / "tests.txt", verdict.record(task))
    finally:
        index.stop()
        if ahead is not None:
            ahead.discard()
    return Attempt(number, spec.session, loop, patch, verdict, setup, workspace.catalog.specs(), unavailable=dead)


def _patch_of(workspace: Workspace, loop: LoopResult) -> tuple[str, SandboxUnavailable | None]:
    """The attempt's patch, or none and the reason when the loop stopped because the sandbox died."""
    try:
        return workspace.patch(), None
    except SandboxUnavailable as exc:
        if loop.stop_reason != "sandbox_unavailable":
            raise
        return "", exc


def _start_messages(task: Task, notes: list[str], number: int, resume_from: Path | None, workspace: Workspace,
                    writer: TrajectoryWriter, say: SessionProgress) -> list[Message]:
    if resume_from is not None:
        lines = read_lines(resume_from)
        messages = [Message.from_dict(d) for d in lines]
        for line, m in zip(lines, messages, strict=False):
            writer.write(m, line.get("meta"))
        say(f"resuming: replaying {sum(len(m.tool_uses) for m in messages)} recorded call(s)")
        replay(messages, workspace.catalog, workspace.context)
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
                 resumed_from: Path | None = None, agent: str | None = None) -> None:
    """result.json: what happened, measured, with the resolved config (secrets are not in Config)."""
    result = SessionResult(
        task=task.id, model=outcome.model, agent=agent, stop_reason=outcome.stop_reason,
        finished=outcome.stop_reason == "end", final_text=outcome.final_text, turns=outcome.turns,
        usage=dataclasses.asdict(outcome.usage), cost_usd=outcome.cost_usd, tests_passed=outcome.tests_passed,
        tests_where=_where(outcome), test_cmd=task.test_cmd,
        patch_files=sum(1 for line in outcome.patch.splitlines() if line.startswith("diff --git ")),
        durations={"total": round(outcome.duration, 3)}, session=outcome.session, image=image,
        attempts=[_attempt_record(a) for a in outcome.attempt_results],
        resumed_from=str(resumed_from) if resumed_from else None,
        finished_at=datetime.now(UTC).isoformat(timespec="seconds"), config=config.to_dict())
    write_session_result(path, result)


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

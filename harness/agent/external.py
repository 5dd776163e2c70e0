"""A session of a third-party agent inside the sandbox, its model calls through the host's gateway.

    image  = ensure_agent_image(session_image(task), agent)   # the session's image + the agent, offline
    with open_task_workspace(task, image=image, kind="external") as workspace:
        with workspace.sandbox.serve_loopback(PORT, gateway.handle):   # 127.0.0.1:PORT inside -> the host
            workspace.sandbox.exec(agent's command)            # the agent runs; every model call is metered
        patch = workspace.patch()
    verdict = fresh_verdict(task, patch)                       # the task's tests, in a fresh sandbox

The agent sees an ordinary OpenAI- or Anthropic-compatible base URL on the container's own loopback and a
dummy key; the real key stays in the host's `Model`. The gateway (`harness.gateway`) forwards model calls
and nothing else, enforces the run's budgets and records every call; when a budget runs out it refuses
the next call, and after `GRACE_SECONDS` the agent's processes are ended from outside. The run's folder
gets what a session of our own loop writes (trajectory.jsonl: the conversation as the gateway saw it,
patch.diff, tests.txt, result.json) plus calls.jsonl (every request and response) and agent.log (the
agent's own output, as the sandbox kept it).
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from harness import checks
from harness.agent.assembly import Workspace, open_task_workspace, session_image
from harness.agent.loop import LoopResult, StopReason
from harness.agent.session import Attempt, SessionOutcome, SessionProgress, prompt, write_result
from harness.agent.trajectory import TrajectoryWriter
from harness.agent.verdict import StartedAhead, Verdict, fresh_verdict, verdict_spec
from harness.config import Config
from harness.core.task import Task
from harness.external import (
    TESTBED,
    AgentRequest,
    AgentSpec,
    RecordedRun,
    check_replay,
    ensure_agent_image,
    run_invocation,
)
from harness.gateway import RECORD_NAME, Gateway, GatewayBudgets
from harness.models import RecordedModel
from harness.models.base import Model
from sandbox.api import ExecResult
from sandbox.docker_sandbox import DockerSandbox
from sandbox.errors import ChannelClosed, SandboxUnavailable
from sandbox.pool import SandboxPool

__all__ = ["GATEWAY_PORT", "ExternalRun", "run_external_session"]

GATEWAY_PORT = 4141
"""The gateway's port on the sandbox's own loopback (nothing else of the image listens there)."""
DUMMY_KEY = "sk-harness-gateway-dummy"
"""The API key the agent holds: any value passes the SDKs' checks, and the gateway ignores it."""
GRACE_SECONDS = 10.0
"""After a budget ran out, how long the agent has to stop on its own before its processes are ended."""
DEFAULT_SECONDS = 3600.0
"""The agent's wall time when the run sets no `max_wall_seconds`."""
OUTPUT_BYTES = 32 * 2**20
"""At most this much of each of the agent's own records (its trajectory) is copied into the run's folder."""


@dataclass(frozen=True)
class ExternalRun:
    """How the agent's command ended: its result (None when it was ended from outside) and why."""

    result: ExecResult | None
    stop_reason: StopReason
    detail: str
    outputs: tuple[str, ...] = ()    # the agent's own records in the sandbox (AgentInvocation.outputs)


def run_external_session(task: Task, agent: AgentSpec, model: Model, config: Config, out_dir: Path, *,
                         image: str | None = None, progress: SessionProgress | None = None,
                         labels: Mapping[str, str] | None = None,
                         sandboxes: SandboxPool | None = None) -> SessionOutcome:
    """Run `agent` on `task` inside a fresh sandbox, its model calls answered by `model` through the
    gateway, then the task's tests in another fresh sandbox; write the run's files into `out_dir`.

    A `replay:` model's recorded run (`recorded_run`) is handed to the agent, which takes over its settings;
    the call budget is then at least the recording's length.

    Raises:
        ConfigError: the agent cannot replay the model's recording (checked before any image is built).
    """
    started = time.monotonic()
    recorded = recorded_run(model)
    check_replay(agent, recorded)
    out_dir = checks.private_dir(Path(out_dir))
    say = progress or (lambda _event: None)
    base = image or session_image(task, config)
    say(f"preparing the image with {agent.label}")
    agent_image = ensure_agent_image(base, agent, progress=lambda line: say(f"agent image: {line}"))
    budgets = GatewayBudgets.from_loop(config.loop)
    if recorded is not None and budgets.max_calls is not None:
        budgets = dataclasses.replace(budgets, max_calls=max(budgets.max_calls, recorded.replies))
    gateway = Gateway(model, budgets=budgets,
                      price=config.model.prices.get(config.model.spec), record=out_dir / RECORD_NAME,
                      model_name=agent_model_name(model.name))
    ahead: StartedAhead | None = None
    verdict: Verdict | None = None
    t0 = time.monotonic()
    try:
        with open_task_workspace(task, config, None, kind="external", image=agent_image, labels=labels,
                                 pool=sandboxes) as workspace:
            if task.test_cmd:   # the verdict's sandbox (the image without the agent) comes up meanwhile
                box = verdict_spec(task, config, base, dict(labels or {}))
                ahead = StartedAhead(box, sandboxes)
            setup = time.monotonic() - t0
            run = _run_agent(workspace, agent, gateway, task, config, say, recorded)
            _write_agent_log(out_dir / "agent.log", run)
            _copy_outputs(workspace, run.outputs, out_dir)
            patch = _patch_after(workspace, run)
            checks.write_file(out_dir / "patch.diff", patch)
            session = workspace.session
        write_trajectory(out_dir / "trajectory.jsonl", gateway)
        if ahead is not None:
            say(f"running the tests in a fresh sandbox (the starting files and the patch): {task.test_cmd}")
            verdict = fresh_verdict(task, patch, config, box, ahead=ahead)
            checks.write_file(out_dir / "tests.txt", verdict.record(task))
    finally:
        if ahead is not None:
            ahead.discard()
    wall, totals = time.monotonic() - t0, gateway.totals
    loop = LoopResult(stop_reason=run.stop_reason, final_text=run.detail, turns=totals.calls, usage=totals.usage,
                      cost_usd=totals.cost_usd, messages=gateway.conversation(), model_seconds=totals.model_seconds,
                      tool_seconds=max(0.0, wall - totals.model_seconds), wall_seconds=wall)
    attempt = Attempt(1, session, loop, patch, verdict, setup)
    outcome = SessionOutcome(stop_reason=run.stop_reason, turns=totals.calls, usage=totals.usage,
                             cost_usd=totals.cost_usd, duration=time.monotonic() - started, patch=patch,
                             out_dir=out_dir, tests_passed=verdict.passed if verdict is not None else None,
                             attempts=1, final_text=run.detail, model=model.name, session=session,
                             attempt_results=[attempt])
    write_result(out_dir / "result.json", task, outcome, config, agent_image, agent=agent.label)
    return outcome


def recorded_run(model: Model) -> RecordedRun | None:
    """The published run a `replay:` model serves, or None for any other model.

    Raises:
        ConfigError: the recording's settings are unreadable.
    """
    if not isinstance(model, RecordedModel):
        return None
    return RecordedRun.from_info(model.info, len(model.replies), str(model.path))


def _run_agent(workspace: Workspace, agent: AgentSpec, gateway: Gateway, task: Task, config: Config,
               say: SessionProgress, recorded: RecordedRun | None) -> ExternalRun:
    """The agent's command, with the gateway served on the sandbox's loopback and a watch on the budgets.
    A replay's agent gets the problem statement alone, as the recorded run did (its recorded instance
    template wraps it), and the recorded step limit."""
    sandbox = workspace.sandbox
    if not isinstance(sandbox, DockerSandbox):
        raise TypeError(f"a third-party agent needs a Docker sandbox, got {type(sandbox).__name__}")
    text = task.problem_statement if recorded is not None else prompt(
        "external_task.md", task_id=task.id, problem=task.problem_statement.strip(),
        tests=f"\nThe project's tests run with: `{task.test_cmd}`\n" if task.test_cmd else "")
    how = agent.invocation(AgentRequest(task=text, model=gateway.model_name, api_key=DUMMY_KEY, workdir=TESTBED,
                                        base_url=f"http://127.0.0.1:{GATEWAY_PORT}/v1", recorded=recorded,
                                        step_limit=0 if recorded is not None else config.loop.max_turns))
    seconds = config.loop.max_wall_seconds or DEFAULT_SECONDS
    ended, interrupting = threading.Event(), threading.Event()
    watch = threading.Thread(target=_watch_budgets, args=(sandbox, gateway, ended, interrupting), daemon=True,
                             name=f"budget-watch-{workspace.session}")
    say(f"agent running: {agent.label}")
    result: ExecResult | None = None
    with sandbox.serve_loopback(GATEWAY_PORT, gateway.handle):
        watch.start()
        try:
            result = run_invocation(sandbox, how, seconds)
        except (ChannelClosed, SandboxUnavailable):
            # ended from outside by the watch: the channel closed, or the command saw the container paused
            # for the sweep; anything else is the sandbox's failure and goes up
            if not interrupting.is_set():
                raise
        finally:
            ended.set()
            watch.join()      # the sweep is over before the channel starts again
    if interrupting.is_set():   # the channel's server was ended with the agent: a new one for the patch
        sandbox.restart_channel()
    if result is None:
        assert gateway.exhausted is not None
        return ExternalRun(None, "budget", f"{gateway.exhausted.message}; the agent did not stop within "
                                           f"{GRACE_SECONDS:.0f} s and was ended", how.outputs)
    if gateway.exhausted is not None:
        return ExternalRun(result, "budget", gateway.exhausted.message, how.outputs)
    if result.timed_out:
        return ExternalRun(result, "budget", f"the agent ran past the wall-time budget of {seconds:.0f} s and was "
                                             "ended", how.outputs)
    if result.exit_code != 0:
        return ExternalRun(result, "error", f"the agent exited with code {result.exit_code}; its output is in "
                                            "agent.log", how.outputs)
    return ExternalRun(result, "end", "the agent exited with code 0", how.outputs)


def agent_model_name(name: str) -> str:
    """The model's name as the agent is told it: `name` with anything but letters, digits and ._:@+/- made
    a dash (a scripted model's name is its file's path), at most 200 characters."""
    cleaned = re.sub(r"[^A-Za-z0-9._:@+/-]", "-", name)[:200].lstrip("-._:@+/")
    return cleaned or "model"


def _watch_budgets(sandbox: DockerSandbox, gateway: Gateway, ended: threading.Event,
                   interrupting: threading.Event) -> None:
    """Once a budget ran out, give the agent GRACE_SECONDS to stop, then end its processes from outside
    (`interrupting` is set first, so the runner knows a closed channel is this)."""
    while not ended.wait(0.2):
        if gateway.exhausted is not None:
            if not ended.wait(GRACE_SECONDS):
                interrupting.set()
                sandbox.interrupt()
            return


def write_trajectory(path: Path, gateway: Gateway) -> None:
    """trajectory.jsonl: the conversation as the gateway last saw it, each reply with its call's turn, stop
    reason and usage in `meta`, as our loop writes them. Agents resend their history: when the conversation
    holds one reply per answered call, the n-th reply is the n-th call's; otherwise (an agent that trims or
    rewrites its history) only the last reply is known to be the last call's."""
    messages, answered = gateway.conversation(), list(enumerate(gateway.answered(), 1))
    replies = [i for i, m in enumerate(messages) if m.role == "assistant"]
    if len(replies) != len(answered):
        replies, answered = replies[-1:], answered[-1:]
    pairs = zip(replies, answered, strict=False)     # both empty when the model answered nothing
    meta = {i: {"turn": turn, "stop_reason": stop, "usage": dataclasses.asdict(usage)}
            for i, (turn, (usage, stop)) in pairs}
    writer = TrajectoryWriter(path)
    for i, message in enumerate(messages):
        writer.write(message, meta.get(i))


def _patch_after(workspace: Workspace, run: ExternalRun) -> str:
    try:
        return workspace.patch()
    except SandboxUnavailable:
        if run.result is not None:
            raise
        return ""


def _copy_outputs(workspace: Workspace, paths: tuple[str, ...], out_dir: Path) -> None:
    """The agent's own records (mini's trajectory, aider's chat history) copied into the run's folder under
    their file names, at most OUTPUT_BYTES each; one the agent never wrote is left out."""
    for path in paths:
        try:
            data = workspace.sandbox.read_file(path, max_bytes=OUTPUT_BYTES).data
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            continue
        checks.write_file(out_dir / PurePosixPath(path).name, data)


def _write_agent_log(path: Path, run: ExternalRun) -> None:
    if run.result is None:
        checks.write_file(path, f"[the agent was ended from outside: {run.detail}]\n")
        return
    r = run.result
    parts = [f"[exit {r.exit_code}{' (timed out)' if r.timed_out else ''} after {r.duration:.1f} s]\n",
             "--- stdout ---\n", r.stdout.text, _saved(r.stdout.truncated, r.stdout.saved_path),
             "\n--- stderr ---\n", r.stderr.text, _saved(r.stderr.truncated, r.stderr.saved_path)]
    checks.write_file(path, "".join(parts))


def _saved(truncated: bool, where: str | None) -> str:
    return f"\n[cut in the middle; the whole stream was saved in the sandbox at {where}]\n" if truncated else ""

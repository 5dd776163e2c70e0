"""The agent loop and its contract.

    M = [system, user]
    repeat at most max_turns times:
        r = model(window(M), tools);  M.append(r)
        if r asks for no tool:  stop "end" with r's text
        M.append(user: [execute(call) for each call in r])   # one tool_result per tool_use, same id
    stop "cap"

Stop reasons: ``end`` (the model asked for nothing: it believes it is done), ``cap`` (turn limit; the
last turn's calls were run and answered, the agent did not finish), ``truncated`` (the response hit
max_tokens: not run, not taken as the end, not added to M), ``error`` (the model API failed after
retries, or the harness failed running a tool), ``budget`` (tokens, cost or wall time ran out),
``stuck`` (the model sent the same calls, or an empty reply, loop.max_repeats times in a row),
``sandbox_unavailable`` (the sandbox's container stopped or vanished during a call: OOM, killed from
outside; an infrastructure failure, not the model's, and nothing is retried against it).

An empty reply (no text, no call) is not taken as the end: a user message asks for a tool call or
a summary. A call repeated exactly gets, with its results, a note that it was repeated. Both count
towards ``stuck``, so a model that repeats itself stops long before the turn cap.

Invariants: the model sees only M (through the history window, which changes what is sent, never
M); every tool_use in M has its tool_result in the next message, also on the way out; M only grows,
and each message is appended to the trajectory file as soon as it exists.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from harness.agent.history import apply_window
from harness.agent.trajectory import TrajectoryWriter
from harness.config import Config
from harness.errors import ConfigError, HarnessError, ModelError, ModelTruncated
from harness.messages import Message, ToolErrorKind, ToolResult, ToolUse, user
from harness.models.base import MALFORMED, Model, ModelResponse, Usage, cost_usd
from harness.tools.base import ToolContext
from harness.tools.catalog import Catalog
from sandbox.errors import SandboxError, SandboxUnavailable

StopReason = Literal["end", "cap", "truncated", "error", "budget", "stuck", "sandbox_unavailable"]
"""Why the loop stopped; each is described in the module docstring."""


@dataclass(frozen=True)
class StepEvent:
    """Progress of a run, for a live display: a model answered, or a tool call finished."""

    kind: Literal["model", "tool"]
    turn: int
    elapsed: float              # seconds since the loop started
    tool: str | None = None
    is_error: bool = False
    usage: Usage = Usage()


@dataclass(frozen=True)
class LoopResult:
    stop_reason: StopReason
    final_text: str             # the model's last words ("end"), or what stopped the run
    turns: int
    usage: Usage
    cost_usd: float | None
    messages: list[Message]
    model_seconds: float
    tool_seconds: float
    wall_seconds: float

    @property
    def finished(self) -> bool:
        """The model itself said it was done (as opposed to being stopped)."""
        return self.stop_reason == "end"


class _Stop(Exception):
    def __init__(self, reason: StopReason, detail: str = "") -> None:
        super().__init__(reason, detail)
        self.reason, self.detail = reason, detail


class AgentLoop:
    """Runs a model against a catalog until one of the stop reasons; see the module docstring."""

    def __init__(self, model: Model, catalog: Catalog, ctx: ToolContext, config: Config, *,
                 trajectory: TrajectoryWriter | None = None,
                 progress: Callable[[StepEvent], None] | None = None) -> None:
        self.model, self.catalog, self.ctx, self.config = model, catalog, ctx, config
        self.trajectory, self.progress = trajectory, progress
        self.price = price_of(config, model.name)
        if config.loop.max_cost_usd is not None and not self.price:
            raise ConfigError(f"loop.max_cost_usd is set ({config.loop.max_cost_usd}) but model.prices has no "
                               f"price for {model.name!r}; add one, e.g. "
                               f'{{"prices": {{"{model.name}": [3.0, 15.0]}}}} (USD per million tokens)')
        self.messages: list[Message] = []
        self.usage = Usage()
        self.turns = 0
        self.model_seconds = self.tool_seconds = 0.0
        self._start = time.monotonic()
        self._repeats = 0                   # how many responses in a row were the same as the one before
        self._last: tuple[str, ...] | None = None

    def run(self, messages: Sequence[Message]) -> LoopResult:
        """Run from `messages` (already in the trajectory): a fresh [system, user] or a resumed M."""
        self.messages = list(messages)
        self.turns = sum(1 for m in self.messages if m.role == "assistant")
        self._start = time.monotonic()
        try:
            self._resume_pending()
            while True:
                self._check_limits()
                self.step()
        except _Stop as stop:
            return self._result(stop.reason, stop.detail)

    def step(self) -> None:
        """One turn: ask the model, record its answer, run and answer its calls."""
        response = self._ask()
        self.turns += 1
        self.usage = self.usage + response.usage
        self._append(response.message, {"turn": self.turns, "stop_reason": response.stop_reason,
                                         "usage": dataclasses.asdict(response.usage)})
        self._emit(StepEvent("model", self.turns, self._elapsed(), usage=response.usage))
        message = response.message
        if not message.tool_uses and message.text.strip():
            raise _Stop("end", message.text)
        repeats = self._count_repeat(message)
        if not message.tool_uses:
            self._append(user(EMPTY_REPLY), {"turn": self.turns, "empty_reply": True})
        else:
            self._answer(message.tool_uses, repeats)
        if repeats + 1 >= self.config.loop.max_repeats:
            what = "an empty reply" if not message.tool_uses else "the same call(s)"
            raise _Stop("stuck", f"the model sent {what} {repeats + 1} times in a row (loop.max_repeats "
                                 f"{self.config.loop.max_repeats}); its changes so far are kept")

    def _count_repeat(self, message: Message) -> int:
        """How many times in a row before this one the model sent exactly this (calls, or an empty reply)."""
        key = tuple(sorted(f"{c.name}\0{json.dumps(c.input, sort_keys=True, default=str)}" for c in message.tool_uses))
        self._repeats = self._repeats + 1 if key == self._last else 0
        self._last = key
        return self._repeats

    def _ask(self) -> ModelResponse:
        window = apply_window(self.messages, self.config.tools.history_window)
        started = time.monotonic()
        try:
            return self.model.respond(window, self.catalog.specs())
        except ModelTruncated as exc:
            self.usage = self.usage + Usage(*exc.tokens)     # spent, though nothing of it is kept
            raise _Stop("truncated", str(exc)) from exc
        except ModelError as exc:
            raise _Stop("error", str(exc)) from exc
        finally:
            self.model_seconds += time.monotonic() - started

    def _answer(self, calls: Sequence[ToolUse], repeats: int = 0) -> None:
        results: list[ToolResult] = []
        timings: list[dict[str, Any]] = []
        failure: Exception | None = None
        for call in calls:
            if failure is not None:
                results.append(ToolResult(call.id, f"not run: the harness stopped after an earlier call "
                                          f"failed ({failure})", is_error=True, error_kind="harness"))
                continue
            started = time.monotonic()
            try:
                result = self._execute(call)
            except (HarnessError, SandboxError) as exc:
                failure = exc
                result = ToolResult(call.id, f"not run to completion: the harness failed: "
                                    f"{type(exc).__name__}: {exc}", is_error=True, error_kind=_kind_of(exc))
            seconds = time.monotonic() - started
            self.tool_seconds += seconds
            if repeats:
                result = dataclasses.replace(result, content=f"{result.content}\n\n{repeat_note(repeats + 1)}")
            results.append(result)
            timing: dict[str, Any] = {"id": call.id, "name": call.name, "seconds": round(seconds, 3),
                                      "is_error": result.is_error}
            if result.details is not None:
                timing["details"] = result.details      # e.g. bash: exit code, duration, stream sizes
            timings.append(timing)
            self._emit(StepEvent("tool", self.turns, self._elapsed(), tool=call.name, is_error=result.is_error))
        self._append(Message("user", tuple(results)), {"turn": self.turns, "tools": timings})
        if failure is not None:   # a dead sandbox ends the session with a reason of its own: no call is retried
            raise _Stop("sandbox_unavailable" if isinstance(failure, SandboxUnavailable) else "error",
                        f"{type(failure).__name__}: {failure}")

    def _execute(self, call: ToolUse) -> ToolResult:
        bad = call.input.get(MALFORMED)
        if isinstance(bad, dict):
            return ToolResult(call.id, str(bad.get("error", "the call could not be read")), is_error=True,
                              error_kind="parsing")
        return self.catalog.execute(call, self.ctx)

    def _resume_pending(self) -> None:
        """A resumed M may end with an answered-by-nobody call list, or with the model's last word."""
        last = self.messages[-1] if self.messages else None
        if last is not None and last.role == "assistant":
            if not last.tool_uses and last.text.strip():
                raise _Stop("end", last.text)
            if not last.tool_uses:
                self._append(user(EMPTY_REPLY), {"turn": self.turns, "empty_reply": True})
            else:
                self._answer(last.tool_uses)

    def _check_limits(self) -> None:
        loop = self.config.loop
        if self.turns >= loop.max_turns:
            raise _Stop("cap", f"the turn limit ({loop.max_turns}) was reached before the agent finished; "
                        "its changes so far are kept; raise it with --max-turns")
        tokens = self.usage.input_tokens + self.usage.output_tokens + self.usage.cache_read_tokens
        if loop.max_total_tokens is not None and tokens >= loop.max_total_tokens:
            raise _Stop("budget", f"token budget spent: {tokens} >= loop.max_total_tokens {loop.max_total_tokens}")
        cost = cost_usd(self.usage, self.price)
        if loop.max_cost_usd is not None and cost is not None and cost >= loop.max_cost_usd:
            raise _Stop("budget", f"cost budget spent: ${cost:.4f} >= loop.max_cost_usd ${loop.max_cost_usd}")
        if loop.max_wall_seconds is not None and self._elapsed() >= loop.max_wall_seconds:
            raise _Stop("budget", f"time budget spent: {self._elapsed():.0f}s >= loop.max_wall_seconds "
                        f"{loop.max_wall_seconds}s")

    def _append(self, message: Message, meta: dict[str, Any]) -> None:
        self.messages.append(message)
        if self.trajectory is not None:
            self.trajectory.write(message, meta)

    def _emit(self, event: StepEvent) -> None:
        if self.progress is not None:
            self.progress(event)

    def _elapsed(self) -> float:
        return time.monotonic() - self._start

    def _result(self, reason: StopReason, detail: str) -> LoopResult:
        return LoopResult(stop_reason=reason, final_text=detail, turns=self.turns, usage=self.usage,
                          cost_usd=cost_usd(self.usage, self.price), messages=list(self.messages),
                          model_seconds=self.model_seconds, tool_seconds=self.tool_seconds,
                          wall_seconds=self._elapsed())


EMPTY_REPLY = ("Your reply was empty: it had no text and no tool call. Call one of the tools to go on, e.g. bash "
               "with {\"command\": \"ls\"}; or, if the work is done, reply with a short summary of what you "
               "changed and no tool call.")


def _kind_of(exc: Exception) -> ToolErrorKind:
    """The error kind of a failure that stops the loop during a tool call."""
    if isinstance(exc, SandboxUnavailable):
        return "sandbox_unavailable"
    return "sandbox" if isinstance(exc, SandboxError) else "harness"


def repeat_note(times: int) -> str:
    return (f"Note: you have now made this exact call {times} times in a row, and repeating it will not "
            "change its result. Do something else: another command, another file, or an edit.")


def price_of(config: Config, name: str) -> list[float] | None:
    """The price of model `name` in config.model.prices: by its spec, without "+react", or by its bare name."""
    base = name.removesuffix("+react")
    for key in (name, base, base.split(":", 1)[-1]):
        if key in config.model.prices:
            return config.model.prices[key]
    return None


def run_loop(model: Model, catalog: Catalog, ctx: ToolContext, messages: Sequence[Message], config: Config, *,
             trajectory: TrajectoryWriter | None = None,
             progress: Callable[[StepEvent], None] | None = None) -> LoopResult:
    """Convenience: `AgentLoop(...).run(messages)`."""
    return AgentLoop(model, catalog, ctx, config, trajectory=trajectory, progress=progress).run(messages)

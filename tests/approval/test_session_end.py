"""A gate whose sessions end while a call waits for a human (`ApprovalGate.end`, what an MCP server does
when its client goes away): the wait stops at once, the request is withdrawn so nobody approves what
nothing would run, a decision made before still stands, and nothing new is queued."""

from __future__ import annotations

import dataclasses
import io
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.approval.console import ConsolePrompt
from harness.approval.gate import ApprovalGate
from harness.approval.policy import load_policy
from harness.approval.queue import ApprovalQueue
from harness.approval.records import DecisionRefused
from harness.config import Config
from harness.errors import ApprovalDenied, ToolError
from harness.tools.base import ToolContext
from harness.tools.outbound.registry import outbound_tools
from tests.approval.helpers import CountingServer, wait_for

WHY = "the MCP client's session ended (its connection closed)"


def _session(state: Path, prompt: ConsolePrompt | None = None) -> tuple[Any, ToolContext, ApprovalGate]:
    config = Config()
    config = config.replace(approval=dataclasses.replace(config.approval, state_dir=state))
    gate = ApprovalGate(ApprovalQueue(state), load_policy(None), mode="ask" if prompt else "queue", timeout=120,
                        poll_interval=0.05, prompt=prompt)
    ctx = ToolContext(sandbox=None, session="s1", tool_use_id="toolu_1", approver=gate)  # type: ignore[arg-type]
    return {t.name: t for t in outbound_tools(config)}["http_request"], ctx, gate


class _Call:
    """One http_request call in a thread of its own, as the MCP server runs each call."""

    def __init__(self, tool: Any, ctx: ToolContext, url: str, key: str) -> None:
        self.outcome: list[object] = []
        self.thread = threading.Thread(target=self._run, args=(tool, ctx, url, key), daemon=True)
        self.thread.start()

    def _run(self, tool: Any, ctx: ToolContext, url: str, key: str) -> None:
        try:
            self.outcome.append(tool.function(ctx, url=url, key=key))
        except Exception as exc:  # noqa: BLE001 - what the call ended with is the test's subject
            self.outcome.append(exc)

    def ended_within(self, seconds: float) -> object:
        self.thread.join(seconds)
        assert not self.thread.is_alive(), f"the call was still waiting {seconds} s later"
        return self.outcome[0]


def _pending(gate: ApprovalGate) -> Any:
    return wait_for(lambda: gate.queue.requests(("pending",)), what="the request to be queued")


def test_a_waiting_call_is_withdrawn_when_its_sessions_end_and_nothing_runs(tmp_path: Path) -> None:
    with CountingServer() as server:
        tool, ctx, gate = _session(tmp_path)
        call = _Call(tool, ctx, server.url("/x"), "fetch-1")
        [request] = _pending(gate)      # type: ignore[misc]
        time.sleep(0.5)
        assert call.thread.is_alive()   # the control: nothing but a decision or the end stops the wait
        started = time.monotonic()
        gate.end(WHY)
        outcome = call.ended_within(5)
        assert time.monotonic() - started < 2
        assert isinstance(outcome, ApprovalDenied) and "Nothing was sent" in str(outcome)
        withdrawn = gate.queue.get(request.id)
        assert (withdrawn.status, withdrawn.decided_by) == ("expired", "session-ended")
        assert withdrawn.reason == f"withdrawn before a decision: {WHY}"
        with pytest.raises(DecisionRefused, match="already expired"):   # a human arriving late approves nothing
            gate.queue.decide(request.id, True, "a human", seen_hash=request.request_hash)
        assert server.count() == 0
        events = [(e.event, e.actor) for e in gate.queue.audit()]
        assert events == [("submitted", "session:s1"), ("expired", "session-ended")]
        with pytest.raises(ToolError, match="was not asked for: the MCP client"):   # and nothing new is queued
            tool.function(ctx, url=server.url("/y"), key="fetch-2")
        assert len(gate.queue.requests()) == 1


def test_one_session_ending_withdraws_its_own_request_only(tmp_path: Path) -> None:
    with CountingServer() as server:
        tool, ctx, gate = _session(tmp_path)
        other = dataclasses.replace(ctx, session="s2", tool_use_id="toolu_2")
        ending = _Call(tool, ctx, server.url("/x"), "fetch-1")
        staying = _Call(tool, other, server.url("/y"), "fetch-2")
        wait_for(lambda: len(gate.queue.requests(("pending",))) == 2, what="both requests to be queued")
        gate.end("the MCP client ended its session", "s1")
        assert isinstance(ending.ended_within(5), ApprovalDenied)
        first, second = gate.queue.find("http_request", "fetch-1"), gate.queue.find("http_request", "fetch-2")
        assert first is not None and second is not None
        assert (first.status, first.reason) == ("expired", "withdrawn before a decision: the MCP client ended "
                                                           "its session")
        time.sleep(0.5)
        assert staying.thread.is_alive() and gate.queue.get(second.id).status == "pending"
        gate.queue.decide(second.id, True, "a human", seen_hash=second.request_hash)
        assert "200" in str(staying.ended_within(10)) and server.count("/y") == 1 and server.count("/x") == 0
        with pytest.raises(ToolError, match="was not asked for"):     # the ended session asks nothing new
            tool.function(ctx, url=server.url("/z"), key="fetch-3")


def test_a_decision_made_before_the_end_still_runs_once(tmp_path: Path) -> None:
    with CountingServer() as server:
        tool, ctx, gate = _session(tmp_path)
        call = _Call(tool, ctx, server.url("/x"), "fetch-1")
        [request] = _pending(gate)      # type: ignore[misc]
        gate.queue.decide(request.id, True, "a human", seen_hash=request.request_hash)
        gate.end(WHY)
        outcome = call.ended_within(10)
        assert isinstance(outcome, str) and "200" in outcome, outcome
        assert gate.queue.get(request.id).status == "done" and server.count() == 1


@pytest.fixture
def terminal() -> Iterator[tuple[io.TextIOWrapper, io.StringIO]]:
    """A prompt's input nobody types into (a pipe: `select` waits on it as on a terminal) and its screen."""
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd) as stdin:
        yield stdin, io.StringIO()
    os.close(write_fd)


def test_the_terminal_prompt_stops_asking_when_the_sessions_end(
        tmp_path: Path, terminal: tuple[io.TextIOWrapper, io.StringIO]) -> None:
    stdin, screen = terminal
    with CountingServer() as server:
        tool, ctx, gate = _session(tmp_path, ConsolePrompt(stdin, screen, poll_interval=0.05))
        call = _Call(tool, ctx, server.url("/x"), "fetch-1")
        [request] = _pending(gate)      # type: ignore[misc]
        wait_for(lambda: "Approve outbound request #1?" in screen.getvalue(), what="the prompt")
        gate.end(WHY)
        assert isinstance(call.ended_within(5), ApprovalDenied)
        assert f"the session ended: request #{request.id} is withdrawn" in screen.getvalue()
        assert gate.queue.get(request.id).decided_by == "session-ended" and server.count() == 0

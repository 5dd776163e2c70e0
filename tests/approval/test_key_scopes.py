"""Idempotency keys of outbound calls belong to their scope (a session; a run and its resumes) and are bound
to the content they ran with. Every store of keys in the tree: the approval queue (this file and
tests/mcp/test_mcp_server.py, apply_changes over real `harness mcp` sessions) and the editing tools'
keys, kept per session inside its sandbox (tests/tools/editing/test_edit_sandbox.py)."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from harness.approval.gate import ApprovalGate
from harness.approval.policy import load_policy
from harness.approval.queue import ApprovalQueue
from harness.config import Config
from harness.errors import ToolError
from harness.tools.base import ToolContext
from harness.tools.outbound.registry import outbound_tools
from tests.approval.helpers import CountingServer


def _tool_and_gate(state: Path) -> tuple[Any, ApprovalGate]:
    policy = state.parent / "policy.toml"
    policy.write_text('[[rules]]\nname = "local"\ntool = "http_request"\ndecision = "approve"\n')
    config = Config()
    config = config.replace(approval=dataclasses.replace(config.approval, state_dir=state))
    gate = ApprovalGate(ApprovalQueue(state), load_policy(policy), mode="deny", timeout=30, poll_interval=0.05)
    return {t.name: t for t in outbound_tools(config)}["http_request"], gate


def _ctx(gate: ApprovalGate, session: str, scope: str = "") -> ToolContext:
    return ToolContext(sandbox=None, session=session, tool_use_id="toolu_1", approver=gate,  # type: ignore[arg-type]
                       key_scope=scope)


def test_the_same_key_in_two_sessions_is_two_actions_each_asked_and_run(tmp_path: Path) -> None:
    tool, gate = _tool_and_gate(tmp_path / "state")
    with CountingServer() as server:
        mine = tool.function(_ctx(gate, "s1"), method="POST", url=server.url("/mine"), body="one", key="send-1")
        # before: "already ran once" with s1's result, nothing sent for s2, nobody asked
        theirs = tool.function(_ctx(gate, "s2"), method="POST", url=server.url("/theirs"), body="two", key="send-1")
        assert "hit 1 POST /mine" in mine and "hit 2 POST /theirs" in theirs and "already" not in theirs
        same = tool.function(_ctx(gate, "s1"), method="POST", url=server.url("/mine"), body="one", key="send-1")
        assert "already ran once" in same and "hit 1 POST /mine" in same       # the session's own stored result
        with pytest.raises(ToolError) as other:
            tool.function(_ctx(gate, "s1"), method="POST", url=server.url("/mine"), body="changed", key="send-1")
        assert "key 'send-1' was already used for a different http_request request (#1, done)" in str(other.value)
        assert server.count() == 2
    requests = gate.queue.requests()
    assert sorted((r.scope, r.key, r.status, r.rule) for r in requests) == [
        ("s1", "send-1", "done", "local"), ("s2", "send-1", "done", "local")]


def test_a_run_and_its_resume_share_keys_through_the_run_scope(tmp_path: Path) -> None:
    tool, gate = _tool_and_gate(tmp_path / "state")
    with CountingServer() as server:
        first = tool.function(_ctx(gate, "task-1a2b", "run:/runs/a"), url=server.url("/x"), key="fetch-1")
        resumed = tool.function(_ctx(gate, "task-9f8e", "run:/runs/a"), url=server.url("/x"), key="fetch-1")
        other_run = tool.function(_ctx(gate, "task-7777", "run:/runs/b"), url=server.url("/x"), key="fetch-1")
        assert "already ran once" in resumed and "hit 1 GET /x" in resumed and "hit 1 GET /x" in first
        assert "hit 2 GET /x" in other_run and server.count() == 2


def test_a_database_made_before_scopes_keeps_its_requests_and_gets_the_scoped_name(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    db = sqlite3.connect(state / "approvals.sqlite3")
    db.executescript("""
        CREATE TABLE requests (id INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT NOT NULL, tool TEXT NOT NULL,
            key TEXT NOT NULL, call_hash TEXT NOT NULL, args TEXT NOT NULL, preview TEXT NOT NULL,
            request_hash TEXT NOT NULL, status TEXT NOT NULL, created_at REAL NOT NULL, decided_at REAL,
            decided_by TEXT, reason TEXT, rule TEXT, approved_hash TEXT, started_at REAL, executor TEXT,
            finished_at REAL, result TEXT);
        CREATE UNIQUE INDEX requests_open_name ON requests (tool, key) WHERE status != 'expired';
        INSERT INTO requests (session, tool, key, call_hash, args, preview, request_hash, status, created_at)
            VALUES ('old', 'http_request', 'k', 'h', '{}', 'p', 'r', 'pending', 0);""")
    db.close()
    queue = ApprovalQueue(state)
    assert queue.get(1).scope == "" and queue.find("http_request", "k", "") == queue.get(1)
    again, created = queue.submit(session="new", scope="s2", tool="http_request", key="k", call_args={}, args={},
                                  preview="p")
    assert created and again.id == 2 and again.scope == "s2"       # the old index would have refused it
    ApprovalQueue(state).close()                                    # opened again: nothing to migrate

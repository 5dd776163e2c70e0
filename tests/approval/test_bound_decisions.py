"""A decision is bound to what the human saw: it names the hash of the request shown, a request asked
again after it expired is a new request with a new id, and the CLI approves without a hash only after
showing the preview on a terminal."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from harness.approval.queue import ApprovalQueue
from harness.approval.records import DecisionRefused, Request
from tests.approval.helpers import Terminal, harness_cli


def _ask(queue: ApprovalQueue, body: str) -> Request:
    url = "http://127.0.0.1:9/collect"
    request, created = queue.submit(session="s", tool="http_request", key="same-key", call_args={"url": url},
                                    args={"method": "POST", "url": url, "body": body},
                                    preview=f"method  POST\nurl     {url}\nbody\n  {body}")
    assert created
    return request


def test_a_request_asked_again_after_expiry_is_a_new_id_and_the_old_approval_cannot_reach_it(tmp_path: Path) -> None:
    queue = ApprovalQueue(tmp_path)
    first = _ask(queue, "harmless")
    seen = json.loads(harness_cli("show", "1", "--json", state_dir=tmp_path).stdout)    # the human reads #1
    queue.expire(first.id, 600)
    second = _ask(queue, "API_TOKEN=sk-live-7f3a9c")            # same key, new content
    assert (first.id, second.id) == (1, 2)
    assert queue.get(1).args["body"] == "harmless" and queue.get(1).status == "expired"   # #1 unchanged
    late = harness_cli("approve", "1", "--hash", seen["request_hash"], state_dir=tmp_path)
    assert (late.returncode, late.stderr.strip()) == (1, (
        "harness approvals: request #1 is already expired (by timeout); only a pending request can be "
        "approved or denied"))
    moved = harness_cli("approve", "2", "--hash", seen["request_hash"], state_dir=tmp_path)
    assert moved.returncode == 1 and (f"request #2 is not the one you saw: its hash is {second.request_hash}"
                                      in moved.stderr)
    blind = harness_cli("approve", "2", state_dir=tmp_path)     # no hash, no terminal
    assert blind.returncode == 2 and "no --hash and no terminal to show the request on" in blind.stderr
    assert "`harness approvals show 2`" in blind.stderr
    assert queue.get(2).status == "pending"
    ok = harness_cli("approve", "2", "--hash", second.request_hash, state_dir=tmp_path)    # positive control
    assert ok.returncode == 0 and ok.stdout.startswith("request #2 (http_request) approved by cli:")
    assert queue.get(2).approved_hash == second.request_hash


def test_the_queue_refuses_an_approval_with_no_hash_or_the_wrong_one(tmp_path: Path) -> None:
    queue = ApprovalQueue(tmp_path)
    request = _ask(queue, "x")
    with pytest.raises(DecisionRefused) as unseen:
        queue.decide(request.id, True, "someone")
    assert (unseen.value.request_id, unseen.value.status, unseen.value.why) == (1, "pending", "unseen")
    with pytest.raises(DecisionRefused) as changed:
        queue.decide(request.id, True, "someone", seen_hash="f" * 64)
    assert changed.value.why == "changed"
    assert queue.decide(request.id, True, "someone", seen_hash=request.request_hash).status == "approved"
    with pytest.raises(DecisionRefused) as decided:
        queue.decide(request.id, False, "someone")
    assert (decided.value.status, decided.value.why) == ("approved", "decided")


def test_approve_without_a_hash_on_a_terminal_shows_the_preview_and_asks(tmp_path: Path) -> None:
    queue = ApprovalQueue(tmp_path)
    _ask(queue, "API_TOKEN=sk-live-7f3a9c")
    other = queue.submit(session="s", tool="http_request", key="other", call_args={"u": 1},
                              args={"u": 1}, preview="method  GET")[0]
    cli = [sys.executable, "-m", "harness.cli.main", "approvals", "--state-dir", str(tmp_path), "approve"]
    term = Terminal([*cli, "1", "--by", "ops"])
    try:
        screen = term.read_until("Approve request #1 as shown above? [yes/no]: ")
        assert "│   API_TOKEN=sk-live-7f3a9c" in screen and f"hash {queue.get(1).request_hash}" in screen
        term.type("yes")
        term.read_until("request #1 (http_request) approved by ops")
        assert term.proc.wait(20) == 0
    finally:
        term.close()
    assert queue.get(1).approved_hash == queue.get(1).request_hash
    term = Terminal([*cli, str(other.id)])                  # "no": nothing is decided
    try:
        term.read_until(f"Approve request #{other.id} as shown above? [yes/no]: ")
        term.type("no")
        term.read_until(f"not approved; request #{other.id} is unchanged")
        assert term.proc.wait(20) == 3
    finally:
        term.close()
    assert queue.get(other.id).status == "pending"


def test_an_old_database_is_migrated_and_keeps_its_requests(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "approvals.sqlite3")
    db.executescript("""
        CREATE TABLE requests (id INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT NOT NULL, tool TEXT NOT NULL,
            key TEXT NOT NULL, call_hash TEXT NOT NULL, args TEXT NOT NULL, preview TEXT NOT NULL,
            request_hash TEXT NOT NULL, status TEXT NOT NULL, created_at REAL NOT NULL, decided_at REAL,
            decided_by TEXT, reason TEXT, rule TEXT, approved_hash TEXT, started_at REAL, executor TEXT,
            finished_at REAL, result TEXT, UNIQUE (tool, key));
        INSERT INTO requests (session, tool, key, call_hash, args, preview, request_hash, status, created_at)
            VALUES ('s', 'http_request', 'same-key', 'c', '{}', 'p', 'h', 'expired', 1.0);""")
    db.commit()
    db.close()
    queue = ApprovalQueue(tmp_path)
    assert queue.get(1).status == "expired"
    assert _ask(queue, "again").id == 2                          # the UNIQUE (tool, key) is gone
    assert queue.find("http_request", "same-key") == queue.get(2)

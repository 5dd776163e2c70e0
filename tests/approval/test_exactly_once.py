"""Exactly-once claims, proved with a counting HTTP server on 127.0.0.1 and real harness processes."""

from __future__ import annotations

import signal
from pathlib import Path

from harness.approval.queue import ApprovalQueue
from tests.approval.helpers import (
    CountingServer,
    approve,
    finish_call,
    harness_cli,
    start_call,
    wait_for,
)


def _pending(state: Path, n: int = 1) -> list:
    queue = ApprovalQueue(state)
    try:
        return wait_for(lambda: (lambda p: p if len(p) >= n else None)(queue.requests(("pending",))),
                        what=f"{n} pending request(s)")  # type: ignore[return-value]
    finally:
        queue.close()


def test_nothing_is_sent_before_approval_then_exactly_once(tmp_path: Path) -> None:
    with CountingServer() as server:
        proc = start_call(tmp_path, server.url(), "send-1")
        request = _pending(tmp_path)[0]
        assert server.count() == 0 and proc.poll() is None      # held: the session waits, nothing left
        decided = approve(tmp_path, request.id)
        assert decided.returncode == 0, decided.stderr
        result = finish_call(proc)
        assert result["ok"] and "hit 1 POST /collect" in str(result["text"])
        assert server.count() == 1


def test_denial_sends_nothing_and_the_model_reads_the_reason(tmp_path: Path) -> None:
    with CountingServer() as server:
        proc = start_call(tmp_path, server.url(), "send-2")
        request = _pending(tmp_path)[0]
        harness_cli("deny", str(request.id), "--reason", "that endpoint is not ours", state_dir=tmp_path)
        result = finish_call(proc)
        assert result == {"ok": False, "error": "ApprovalDenied", "text": result["text"]}
        assert "denied by cli:" in str(result["text"]) and "that endpoint is not ours" in str(result["text"])
        assert "Nothing was sent" in str(result["text"])
        assert server.count() == 0


def test_repeating_an_executed_key_returns_the_stored_result_without_sending(tmp_path: Path) -> None:
    with CountingServer() as server:
        first = start_call(tmp_path, server.url(), "send-3")
        approve(tmp_path, _pending(tmp_path)[0].id)
        assert finish_call(first)["ok"]
        again = finish_call(start_call(tmp_path, server.url(), "send-3"))
        assert "already ran once" in str(again["text"]) and "hit 1 POST /collect" in str(again["text"])
        assert server.count() == 1
        # positive control: a new key is a new action, held and sent once more after approval
        other = start_call(tmp_path, server.url(), "send-3b")
        approve(tmp_path, _pending(tmp_path)[0].id)
        assert "hit 2 POST" in str(finish_call(other)["text"])
        assert server.count() == 2


def test_a_key_reused_for_different_arguments_is_refused(tmp_path: Path) -> None:
    with CountingServer() as server:
        first = start_call(tmp_path, server.url(), "send-4", body="one")
        approve(tmp_path, _pending(tmp_path)[0].id)
        finish_call(first)
        other = finish_call(start_call(tmp_path, server.url(), "send-4", body="two"))
        assert other["ok"] is False
        assert "key 'send-4' was already used for a different http_request request" in str(other["text"])
        assert server.count() == 1


def test_killed_mid_wait_and_restarted_the_request_runs_once(tmp_path: Path) -> None:
    with CountingServer() as server:
        proc = start_call(tmp_path, server.url(), "send-5")
        request = _pending(tmp_path)[0]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        restarted = start_call(tmp_path, server.url(), "send-5")     # the resumed session asks again
        wait_for(lambda: restarted.poll() is None, what="restarted process waiting")
        assert len(ApprovalQueue(tmp_path).requests()) == 1             # it waits on the same request
        approve(tmp_path, request.id)
        assert "hit 1 POST" in str(finish_call(restarted)["text"])
        assert server.count() == 1


def test_approved_while_no_session_waits_then_resumed_runs_once(tmp_path: Path) -> None:
    with CountingServer() as server:
        proc = start_call(tmp_path, server.url(), "send-6")
        request = _pending(tmp_path)[0]
        proc.kill()
        proc.wait(10)
        approve(tmp_path, request.id)
        assert server.count() == 0                                   # approval alone sends nothing
        assert "hit 1 POST" in str(finish_call(start_call(tmp_path, server.url(), "send-6"))["text"])
        assert server.count() == 1


def test_two_sessions_racing_on_one_key_send_once_and_share_the_result(tmp_path: Path) -> None:
    with CountingServer() as server:
        procs = [start_call(tmp_path, server.url(), "shared-key") for _ in range(2)]
        wait_for(lambda: ApprovalQueue(tmp_path).requests(("pending",)), what="pending request")
        wait_for(lambda: all(p.poll() is None for p in procs), what="both waiting")
        assert len(ApprovalQueue(tmp_path).requests()) == 1
        approve(tmp_path, _pending(tmp_path)[0].id)
        results = [finish_call(p) for p in procs]
        assert all("hit 1 POST /collect" in str(r["text"]) for r in results)
        assert sum("already ran once" in str(r["text"]) for r in results) == 1
        assert server.count() == 1


def test_a_crash_between_send_and_record_reports_outcome_unknown(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rules]]\nname = "local"\ntool = "http_request"\ndecision = "approve"\n'
                      'match = { url = "http://127\\\\.0\\\\.0\\\\.1:[0-9]+/hang" }\n')
    with CountingServer() as server:
        proc = start_call(tmp_path / "state", server.url("/hang"), "send-7", policy=policy)
        wait_for(lambda: server.count("/hang") == 1, what="the request to arrive")
        proc.kill()                                                   # sent, result never recorded
        proc.wait(10)
        again = finish_call(start_call(tmp_path / "state", server.url("/hang"), "send-7", policy=policy))
        assert again["ok"] is False and str(again["text"]).startswith("outcome unknown, not retried")
        assert server.count("/hang") == 1
        listing = harness_cli("list", "--all", state_dir=tmp_path / "state")
        assert "executing (outcome unknown, not retried)" in listing.stdout


def test_a_request_left_pending_by_a_killed_caller_gets_the_policy_on_retry(tmp_path: Path) -> None:
    # Killed between asking and the policy's verdict: the retry finds the request pending. The policy
    # must decide it then, not a human after a timeout (an unattended run would wait it out and expire).
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rules]]\nname = "collect"\ntool = "http_request"\ndecision = "approve"\n')
    with CountingServer() as server:
        proc = start_call(tmp_path, server.url(), "send-7")            # no policy: left pending
        _pending(tmp_path)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        retry = start_call(tmp_path, server.url(), "send-7", mode="deny", policy=policy, timeout=30)
        assert "hit 1 POST" in str(finish_call(retry, timeout=20)["text"])
        assert server.count() == 1
        request = ApprovalQueue(tmp_path).requests()[0]
        assert (request.status, request.decided_by) == ("done", "policy")

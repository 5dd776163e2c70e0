"""Grants made where a person decides: `harness approvals approve ID --hash H --grant ...` and the `g`
answer at the terminal prompt, with harness processes that ask, real SQLite and a counting server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.approval.queue import ApprovalQueue
from tests.approval.helpers import (
    CALLER,
    CountingServer,
    Terminal,
    approve,
    finish_call,
    harness_cli,
    start_call,
    wait_for,
)


def _pending(queue: ApprovalQueue, n: int) -> list[int]:
    found = wait_for(lambda: [r.id for r in queue.requests(("pending",))] if len(queue.requests(("pending",))) >= n
                     else None, what=f"{n} pending request(s)")
    return list(found)  # type: ignore[call-overload]


def test_a_cli_grant_shows_its_rule_decides_later_requests_and_ends_when_revoked(tmp_path: Path) -> None:
    queue = ApprovalQueue(tmp_path)
    with CountingServer() as server:
        proc = start_call(tmp_path, server.url("/docs/3/page0.html"), "g-0", method="GET")
        first = _pending(queue, 1)[0]
        widened = approve(tmp_path, first, "--grant", "run", "--narrow", "path=/docs/", "--yes")
        assert widened.returncode == 2 and "would widen the grant: it is not under /docs/3/" in widened.stderr
        off_tty = approve(tmp_path, first, "--grant", "run")
        assert off_tty.returncode == 2 and "confirmed on a terminal, or with --yes" in off_tty.stderr
        assert queue.get(first).status == "pending" and server.count() == 0
        made = approve(tmp_path, first, "--grant", "run", "--yes")
        assert made.returncode == 0, made.stderr
        assert (f"for this run: approve http_request GET http://127.0.0.1:{server.port}/docs/3/** (no query; no body; "
                "no headers, no operator credential") in made.stdout and "grant G1 made" in made.stdout
        finish_call(proc)
        later = finish_call(start_call(tmp_path, server.url("/docs/3/page1.html"), "g-1", method="GET"))
        assert "hit 2 GET /docs/3/page1.html" in str(later["text"])           # no one asked
        listed = harness_cli("grants", state_dir=tmp_path)
        assert "G1" in listed.stdout and "active" in listed.stdout and "decided 1" in listed.stdout
        assert "from request #1" in listed.stdout
        shown = json.loads(harness_cli("grants", "--json", state_dir=tmp_path).stdout)[0]
        assert shown["preview_hash"] == queue.get(first).request_hash and shown["granted_by"].startswith("cli:")
        history = harness_cli("list", "--all", state_dir=tmp_path).stdout
        assert "by grant:G1" in history
        assert harness_cli("revoke", "G1", state_dir=tmp_path).returncode == 0
        proc = start_call(tmp_path, server.url("/docs/3/page2.html"), "g-2", method="GET")
        third = _pending(queue, 1)[0]                                        # asked again
        assert harness_cli("deny", str(third), state_dir=tmp_path).returncode == 0
        assert finish_call(proc)["error"] == "ApprovalDenied" and server.count() == 2
    events = [json.loads(line) for line in harness_cli("export", state_dir=tmp_path).stdout.splitlines()]
    assert [(e["request_id"], e["event"], e["actor"]) for e in events if e["detail"].get("grant")] == [
        (2, "approved", "grant:G1"), (1, "grant-revoked", shown["granted_by"])]


def test_a_post_with_a_body_cannot_become_a_grant_and_stays_pending(tmp_path: Path) -> None:
    queue = ApprovalQueue(tmp_path)
    with CountingServer() as server:
        proc = start_call(tmp_path, server.url("/notify"), "post-1", body="tests pass")
        first = _pending(queue, 1)[0]
        refused = approve(tmp_path, first, "--grant", "run", "--yes")
        assert refused.returncode == 1 and "a POST request is never approved by a grant" in refused.stderr
        assert queue.get(first).status == "pending"
        assert approve(tmp_path, first).returncode == 0                     # positive control: once is fine
        assert "hit 1 POST /notify" in str(finish_call(proc)["text"])


def test_g_at_the_terminal_prompt_shows_the_rule_and_the_next_request_says_approved_by_grant(tmp_path: Path) -> None:
    with CountingServer() as server:
        def ask(path: str, key: str) -> Terminal:
            return Terminal([sys.executable, str(CALLER), "--state-dir", str(tmp_path), "--mode", "ask", "--url",
                             server.url(path), "--key", key, "--method", "GET"])
        term = ask("/docs/3/../a.html", "t-0")
        try:
            term.read_until("Approve outbound request #1? [yes/no]")
            term.type("g")
            term.read_until("no grant can be made from request #1: this URL has userinfo, dot segments")
            term.type("yes")                                             # asked again: approved once
            assert "hit 1 GET" in str(term.result()["text"])
        finally:
            term.close()
        term = ask("/docs/3/a.html", "t-1")
        try:
            term.read_until("Approve outbound request #2? [yes/no]")
            term.type("g")
            screen = term.read_until("Make this grant? [yes/no]")
            assert f"grant for this run: approve http_request GET http://127.0.0.1:{server.port}/docs/3/**" in screen
            term.type("yes")
            assert "hit 2 GET" in str(term.result()["text"])
        finally:
            term.close()
        term = ask("/docs/3/b.html", "t-2\x1b[2J")
        try:
            screen = term.read_until("approved by grant G1")
            assert "outbound request #3 (http_request, key t-2\\x1b[2J) approved by grant G1" in screen
            assert "hit 3 GET /docs/3/b.html" in str(term.result()["text"])
            assert "Approve outbound request #3" not in term.screen.decode(errors="replace")
            assert b"\x1b" not in term.screen
        finally:
            term.close()


def test_a_deny_grant_for_30_minutes_refuses_the_next_request_to_that_host_without_asking(tmp_path: Path) -> None:
    queue = ApprovalQueue(tmp_path)
    with CountingServer() as server:
        proc = start_call(tmp_path, server.url("/a"), "deny-1", body="one")
        first = _pending(queue, 1)[0]
        shown = json.loads(harness_cli("show", str(first), "--json", state_dir=tmp_path).stdout)
        made = harness_cli("deny", str(first), "--hash", shown["request_hash"], "--grant", "30m", "--yes",
                           "--reason", "not this host", state_dir=tmp_path)
        assert made.returncode == 0, made.stderr
        assert f"deny http_request of any method to http://127.0.0.1:{server.port}/** (any path" in made.stdout
        assert finish_call(proc)["error"] == "ApprovalDenied"
        later = finish_call(start_call(tmp_path, server.url("/b?x=1"), "deny-2", body="two"))
        assert later["error"] == "ApprovalDenied" and "denied by grant:G1" in str(later["text"])
        assert server.count() == 0
        listed = harness_cli("grants", state_dir=tmp_path).stdout
        assert "until 20" in listed and "decided 1" in listed
    bad = harness_cli("deny", "1", "--hash", "x", "--grant", "soon", state_dir=tmp_path)
    assert bad.returncode == 2 and "'soon' is not run, session or a duration such as 30m" in bad.stderr


def test_the_cli_asks_before_it_grants_on_a_terminal_and_no_leaves_the_request_pending(tmp_path: Path) -> None:
    queue = ApprovalQueue(tmp_path)
    with CountingServer() as server:
        proc = start_call(tmp_path, server.url("/docs/3/a.html"), "tty-g", method="GET")
        first = _pending(queue, 1)[0]
        seen = queue.get(first).request_hash
        command = [sys.executable, "-m", "harness.cli.main", "approvals", "--state-dir", str(tmp_path), "approve",
                   str(first), "--hash", seen, "--grant", "session"]
        term = Terminal(command)
        try:
            screen = term.read_until("Make this grant? [yes/no]: ")
            assert f"for this session: approve http_request GET http://127.0.0.1:{server.port}/docs/3/**" in screen
            term.type("no")
            term.read_until("no grant made; request #1 is unchanged")
            assert term.proc.wait(20) == 3 and queue.get(first).status == "pending" and queue.grants() == []
        finally:
            term.close()
        term = Terminal(command)
        try:
            term.read_until("Make this grant? [yes/no]: ")
            term.type("yes")
            term.read_until("grant G1 made")
            assert term.proc.wait(20) == 0
        finally:
            term.close()
        assert "hit 1 GET" in str(finish_call(proc)["text"])
        assert queue.grant(1).scope_kind == "session"


def test_d_at_the_terminal_prompt_denies_this_host_for_the_run_and_the_next_request_is_refused_unasked(
        tmp_path: Path) -> None:
    with CountingServer() as server:
        def ask(path: str, key: str) -> Terminal:
            return Terminal([sys.executable, str(CALLER), "--state-dir", str(tmp_path), "--mode", "ask", "--url",
                             server.url(path), "--key", key, "--body", "data"])
        term = ask("/upload", "d-1")
        try:
            term.read_until("Approve outbound request #1? [yes/no]")
            term.type("d")
            screen = term.read_until("Make this grant? [yes/no]")
            assert f"grant for this run: deny http_request of any method to http://127.0.0.1:{server.port}/**" in screen
            term.type("yes")
            assert term.result()["error"] == "ApprovalDenied"
        finally:
            term.close()
        term = ask("/other", "d-2")
        try:
            term.read_until("denied by grant G1")
            assert term.result()["error"] == "ApprovalDenied"
            assert "Approve outbound request #2" not in term.screen.decode(errors="replace")
        finally:
            term.close()
        assert server.count() == 0

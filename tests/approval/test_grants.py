"""Grants: one decision extended by a rule derived from the request, and every way to widen it tried.

Real gate, real SQLite queue, real http_request against counting servers on 127.0.0.1; the person at
the prompt is `ScriptedHuman` (tests/approval/grant_session.py), which counts what it is asked.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.approval.grants import NotGrantable, canonical_url, covers, derive
from harness.approval.queue import ApprovalQueue
from harness.errors import ApprovalError
from tests.approval.grant_session import ScriptedHuman, call, session
from tests.approval.helpers import CountingServer

ACCEPT = {"Accept": "text/html"}


@pytest.fixture
def servers() -> Iterator[tuple[CountingServer, CountingServer]]:
    with CountingServer() as docs, CountingServer() as other:
        yield docs, other


def _granting_first(answers: list[str]) -> ScriptedHuman:
    """Answers `g` to the first request it is asked about, then `answers` in turn, then `n`."""
    queue = ["g", *answers]
    return ScriptedHuman(lambda request: queue.pop(0) if queue else "n")


def test_the_derived_rule_of_a_get_is_its_folder_its_headers_and_nothing_more(tmp_path: Path) -> None:
    rule = derive("http_request", {"method": "GET", "url": "http://H:8000/docs/3/page0.html", "body": None,
                                   "headers": ACCEPT, "credential": None}, "approve")
    assert rule.text() == ("approve http_request GET http://h:8000/docs/3/** (no query; no body; no headers beyond "
                           "[accept: text/html], no operator credential; no userinfo, dot segments or encoded "
                           "separators)")
    for tool, args, why in (
            ("http_request", {"method": "POST", "url": "http://h/a", "body": None}, "a POST request is never"),
            ("http_request", {"method": "GET", "url": "http://h/a", "body": "x"}, "with a body is never"),
            ("git_push", {"remote": "origin", "branch": "main"}, "a git_push is never approved by a grant"),
            ("apply_changes", {}, "cannot be approved by a grant")):
        with pytest.raises(NotGrantable, match=why):
            derive(tool, args, "approve")
    assert derive("git_push", {"remote": "origin"}, "deny").text() == "deny git_push of any branch to remote origin"


def test_a_grant_runs_later_requests_it_covers_without_a_prompt_each_once(
        tmp_path: Path, servers: tuple[CountingServer, CountingServer]) -> None:
    docs, _ = servers
    human = _granting_first([])
    tools, ctx, gate = session(tmp_path, human)
    first = call(tools, ctx, "http_request", method="GET", url=docs.url("/docs/3/page0.html"), headers=ACCEPT, key="k0")
    assert "hit 1 GET /docs/3/page0.html" in first
    covered = [docs.url("/docs/3/page1.html"), docs.url("/docs/3/sub/deeper.html"),
               docs.url("/docs/3/%70age2.html"),                                     # an encoded unreserved letter
               f"HTTP://127.0.0.1:{docs.port}/docs/3/page3.html"]                    # scheme case: the same origin
    for i, url in enumerate(covered):
        out = call(tools, ctx, "http_request", method="GET", url=url, headers=ACCEPT, key=f"c{i}")
        assert out.startswith("HTTP 200"), out
    out = call(tools, ctx, "http_request", method="GET", url=docs.url("/docs/3/nohdr.html"), key="fewer")
    assert out.startswith("HTTP 200")                              # fewer headers than the request had: covered
    assert len(human.asked) == 1 and docs.count() == 6             # one prompt; each request sent once
    assert [r.grant_id for r in human.told] == [1] * 5 and all("approved by grant G1" in (r.reason or "")
                                                               for r in human.told)
    again = call(tools, ctx, "http_request", method="GET", url=docs.url("/docs/3/page1.html"), headers=ACCEPT, key="c0")
    assert "already ran once" in again and docs.count() == 6       # exactly once is unchanged
    grant = gate.queue.grant(1)
    assert (grant.decided, grant.from_request, grant.granted_by) == (5, 1, "scripted-approver")
    assert grant.preview_hash == gate.queue.get(1).request_hash
    by_grant = [e for e in gate.queue.audit() if e.actor == "grant:G1"]
    assert [(e.event, e.detail["grant"]) for e in by_grant] == [("approved", 1)] * 5


def _widenings(docs: CountingServer, other: CountingServer) -> list[tuple[str, dict[str, Any]]]:
    base = f"http://127.0.0.1:{docs.port}"
    get: dict[str, Any] = {"method": "GET", "headers": ACCEPT}
    return [
        ("other method", {**get, "method": "POST", "url": f"{base}/docs/3/a.html"}),
        ("HEAD instead of GET", {**get, "method": "HEAD", "url": f"{base}/docs/3/a.html"}),
        ("other host name, same server", {**get, "url": f"http://localhost:{docs.port}/docs/3/a.html"}),
        ("other port", {**get, "url": f"http://127.0.0.1:{other.port}/docs/3/a.html"}),
        ("other scheme", {**get, "url": f"https://127.0.0.1:{docs.port}/docs/3/a.html"}),
        ("sibling folder sharing the prefix's letters", {**get, "url": f"{base}/docs/30/a.html"}),
        ("the parent folder", {**get, "url": f"{base}/docs/a.html"}),
        ("the folder without its slash", {**get, "url": f"{base}/docs/3"}),
        ("dot segments", {**get, "url": f"{base}/docs/3/../../admin"}),
        ("a dot segment that stays inside", {**get, "url": f"{base}/docs/3/./a.html"}),
        ("percent-encoded dot segments", {**get, "url": f"{base}/docs/3/%2e%2e/%2e%2e/admin"}),
        ("upper-case encoded dots", {**get, "url": f"{base}/docs/3/%2E%2E/admin"}),
        ("encoded slashes", {**get, "url": f"{base}/docs/3/..%2F..%2Fadmin"}),
        ("encoded backslashes", {**get, "url": f"{base}/docs/3/..%5C..%5Cadmin"}),
        ("a path parameter after dots (read as .. by Tomcat)", {**get, "url": f"{base}/docs/3/..;/..;/admin"}),
        ("three dots", {**get, "url": f"{base}/docs/3/.../admin"}),
        ("double-encoded dots", {**get, "url": f"{base}/docs/3/%252e%252e/%252e%252e/admin"}),
        ("unicode full-width dots", {**get, "url": f"{base}/docs/3/\uff0e\uff0e/admin"}),
        ("encoded full-width dots", {**get, "url": f"{base}/docs/3/%EF%BC%8E%EF%BC%8E/admin"}),
        ("a lookalike host (Cyrillic o)", {**get, "url": f"http://l\u043ecalhost:{docs.port}/docs/3/a.html"}),
        ("an extra header", {**get, "headers": {**ACCEPT, "X-Note": "API_TOKEN=s3cr3t"}, "url": f"{base}/docs/3/a"}),
        ("the same header, another value", {**get, "headers": {"Accept": "*/*"}, "url": f"{base}/docs/3/a.html"}),
        ("a body", {**get, "body": "x", "url": f"{base}/docs/3/a.html"}),
        ("userinfo in the URL", {**get, "url": f"http://user@127.0.0.1:{docs.port}/docs/3/a.html"}),
        ("user and password in the URL", {**get, "url": f"http://u:p@127.0.0.1:{docs.port}/docs/3/a.html"}),
        ("a query", {**get, "url": f"{base}/docs/3/a.html?id=1"}),
    ]


def test_every_widening_of_a_grant_is_asked_about_and_nothing_unapproved_is_sent(
        tmp_path: Path, servers: tuple[CountingServer, CountingServer]) -> None:
    docs, other = servers
    human = _granting_first([])           # grants the first request, then says no to everything it is asked
    tools, ctx, gate = session(tmp_path, human)
    call(tools, ctx, "http_request", method="GET", url=docs.url("/docs/3/page0.html"), headers=ACCEPT, key="k0")
    assert docs.count() == 1
    for i, (what, args) in enumerate(_widenings(docs, other)):
        asked = len(human.asked)
        out = call(tools, ctx, "http_request", key=f"w{i}", **args)
        assert len(human.asked) == asked + 1, f"{what}: decided without a prompt: {out[:200]}"
        assert "denied by scripted-approver" in out, (what, out[:200])
    assert docs.count() == 1 and other.count() == 0                # none of them was sent
    # positive control: the same probes are covered once a person grants them (the servers are reachable)
    covered = call(tools, ctx, "http_request", method="GET", url=docs.url("/docs/3/page9.html"), headers=ACCEPT,
                   key="p")
    assert covered.startswith("HTTP 200") and docs.count() == 2
    assert gate.queue.grant(1).decided == 1


def test_a_redirect_is_reported_and_its_target_is_a_request_of_its_own(
        tmp_path: Path, servers: tuple[CountingServer, CountingServer]) -> None:
    docs, _ = servers
    human = _granting_first([])
    tools, ctx, _ = session(tmp_path, human)
    call(tools, ctx, "http_request", method="GET", url=docs.url("/redirect/a"), key="r0")
    out = call(tools, ctx, "http_request", method="GET", url=docs.url("/redirect/b"), key="r1")   # covered
    assert "HTTP 302" in out and "not followed" in out and docs.count("/elsewhere") == 0
    target = call(tools, ctx, "http_request", method="GET", url=docs.url("/elsewhere"), key="r2")
    assert len(human.asked) == 2 and "denied" in target and docs.count("/elsewhere") == 0


def test_a_grant_is_for_its_run_and_ends_when_revoked(tmp_path: Path,
                                                      servers: tuple[CountingServer, CountingServer]) -> None:
    docs, _ = servers
    human = _granting_first([])
    tools, ctx, gate = session(tmp_path, human)
    call(tools, ctx, "http_request", method="GET", url=docs.url("/docs/3/a.html"), key="a")
    other_tools, other_ctx, _ = session(tmp_path, human, scope="run:another-run")
    out = call(other_tools, other_ctx, "http_request", method="GET", url=docs.url("/docs/3/b.html"), key="b")
    assert len(human.asked) == 2 and "denied" in out                 # another run: asked
    same_run = call(tools, ctx, "http_request", method="GET", url=docs.url("/docs/3/c.html"), key="c")
    assert same_run.startswith("HTTP 200")
    gate.queue.revoke(1, "cli:operator")
    out = call(tools, ctx, "http_request", method="GET", url=docs.url("/docs/3/d.html"), key="d")
    assert len(human.asked) == 3 and "denied" in out and docs.count() == 2
    assert gate.queue.grant(1).revoked_by == "cli:operator"


def test_a_request_approved_by_a_grant_revoked_before_its_claim_does_not_run(tmp_path: Path) -> None:
    queue = ApprovalQueue(tmp_path)
    args: dict[str, Any] = {"method": "GET", "url": "http://127.0.0.1:9/docs/a", "headers": {}, "body": None,
                            "credential": None}
    first, _ = queue.submit(session="s", scope="run:x", tool="http_request", key="a", call_args={"k": 1}, args=args,
                            preview="p")
    queue.decide_with_grant(first.id, True, "me", seen_hash=first.request_hash, scope_kind="run",
                            shown_rule=queue.derive_grant(first.id, True))
    later, _ = queue.submit(session="s", scope="run:x", tool="http_request", key="b", call_args={"k": 2},
                            args={**args, "url": "http://127.0.0.1:9/docs/b"}, preview="p2")
    assert queue.decide_by_grant(later.id) is not None and queue.get(later.id).status == "approved"
    queue.revoke(1, "me")
    assert queue.claim(later.id) is None
    assert queue.get(later.id).status == "denied" and "revoked" in (queue.get(later.id).reason or "")
    assert queue.claim(first.id) is not None          # positive control: the person's own approval still runs


def test_a_deny_grant_refuses_every_later_request_to_that_host_at_once(
        tmp_path: Path, servers: tuple[CountingServer, CountingServer]) -> None:
    docs, other = servers
    human = ScriptedHuman(lambda request: "d" if request.key == "first" else "y")
    tools, ctx, gate = session(tmp_path, human)
    call(tools, ctx, "http_request", method="GET", url=docs.url("/x"), key="first")
    attempts: tuple[dict[str, Any], ...] = (
        {"method": "POST", "url": docs.url("/api"), "body": "b"},
        {"method": "GET", "url": f"http://user@127.0.0.1:{docs.port}/docs/3/../x"},
        {"method": "GET", "url": docs.url("/anything?q=1"), "headers": {"X": "y"}})
    for i, args in enumerate(attempts):
        assert "denied by grant:G1" in call(tools, ctx, "http_request", key=f"d{i}", **args)
    assert len(human.asked) == 1 and docs.count() == 0
    ok = call(tools, ctx, "http_request", method="GET", url=other.url("/x"), key="other")   # another port: asked
    assert len(human.asked) == 2 and ok.startswith("HTTP 200") and other.count() == 1
    assert gate.queue.grant(1).decided == 3


def test_narrowing_may_only_take_away(tmp_path: Path) -> None:
    queue = ApprovalQueue(tmp_path)
    args = {"method": "GET", "url": "http://h:8000/docs/3/page0.html", "headers": ACCEPT, "body": None,
            "credential": None}
    request, _ = queue.submit(session="s", tool="http_request", key="a", call_args={}, args=args, preview="p")
    narrowed = queue.derive_grant(request.id, True, (("path", "/docs/3/api/**"), ("headers", "")))
    assert narrowed.get("path") == "/docs/3/api/" and json.loads(narrowed.get("headers")) == []
    assert covers(narrowed, "http_request", {**args, "url": "http://h:8000/docs/3/api/x", "headers": {}})
    assert not covers(narrowed, "http_request", {**args, "url": "http://h:8000/docs/3/x", "headers": {}})
    for key, pattern, why in (("path", "/docs/", "would widen the grant: it is not under /docs/3/"),
                              ("path", "/other/", "would widen"), ("path", "/docs/3/../../", "a plain folder"),
                              ("headers", "Accept,X-Other", "would widen the grant: the request had no header"),
                              ("host", "evil.example", "can narrow only ['path', 'headers']"),
                              ("method", "POST", "can narrow only")):
        with pytest.raises(ApprovalError, match=why.replace("[", r"\[").replace("]", r"\]")):
            queue.derive_grant(request.id, True, ((key, pattern),))


def test_pip_grants_cover_this_package_at_any_pinned_version_from_this_index_only() -> None:
    stored = {"requirement": "attrs==23.1.0", "index_url": "http://127.0.0.1:9/simple", "index_url_sha256": "a" * 64,
              "python_version": "3.11", "platforms": ["manylinux_2_17_x86_64"]}
    rule = derive("pip_download", stored, "approve")
    assert "approve pip_download attrs==<any pinned version" in rule.text()
    assert covers(rule, "pip_download", {**stored, "requirement": "attrs==24.2.0"})
    assert covers(rule, "pip_download", {**stored, "requirement": "Attrs==1.0"})       # the same name, normalised
    for requirement in ("attrs>=23", "attrs", "attrs==23.*", "attrs[tests]==23.1.0", "cattrs==23.1.0",
                        "attrs==23.1.0; python_version<'4'"):
        assert not covers(rule, "pip_download", {**stored, "requirement": requirement}), requirement
    for changed in ({"index_url": "http://127.0.0.1:9/other"}, {"index_url_sha256": "b" * 64},
                    {"python_version": "3.12"}, {"platforms": ["win_amd64"]}):
        assert not covers(rule, "pip_download", {**stored, "requirement": "attrs==24.2.0", **changed}), changed


def test_canonical_url_resolves_before_it_is_compared() -> None:
    parsed = canonical_url("HTTP://LocalHost/docs/3/%2e%2e/x")
    assert parsed is not None
    assert (parsed.origin, parsed.path, parsed.exact) == ("http://localhost:80", "/docs/x", False)
    looks = canonical_url("http://l\u043ecalhost/")
    assert looks is not None and looks.host.startswith("xn--") and looks.host != "localhost"


def test_a_grant_past_its_time_decides_nothing(tmp_path: Path) -> None:
    queue = ApprovalQueue(tmp_path)
    args: dict[str, Any] = {"method": "GET", "url": "http://127.0.0.1:9/docs/a", "headers": {}, "body": None,
                            "credential": None}
    first, _ = queue.submit(session="s", scope="run:x", tool="http_request", key="a", call_args={}, args=args,
                            preview="p")
    queue.decide_with_grant(first.id, True, "me", seen_hash=first.request_hash, scope_kind="until",
                            expires_at=time.time() - 1, shown_rule=queue.derive_grant(first.id, True))
    later, _ = queue.submit(session="other", scope="run:y", tool="http_request", key="b", call_args={},
                            args={**args, "url": "http://127.0.0.1:9/docs/b"}, preview="p2")
    assert queue.decide_by_grant(later.id) is None and queue.get(later.id).status == "pending"
    queue.decide_with_grant(later.id, True, "me", seen_hash=later.request_hash, scope_kind="until",
                            expires_at=time.time() + 60, shown_rule=queue.derive_grant(later.id, True))
    third, _ = queue.submit(session="third", scope="run:z", tool="http_request", key="c", call_args={},
                            args={**args, "url": "http://127.0.0.1:9/docs/c"}, preview="p3")
    decided = queue.decide_by_grant(third.id)           # positive control: in time, any session
    assert decided is not None and (decided.status, decided.grant_id) == ("approved", 2)

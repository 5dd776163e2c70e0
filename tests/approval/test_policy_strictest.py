"""Policy rules combine strictest-wins (deny over ask over approve), whatever their order in the file, and a
file written for first-match order loads with a warning naming each pair whose outcome changed."""

from __future__ import annotations

import dataclasses
import itertools
import logging
from pathlib import Path

import pytest

from harness.approval.gate import ApprovalGate
from harness.approval.policy import load_policy
from harness.approval.queue import ApprovalQueue
from harness.config import Config
from harness.errors import ApprovalDenied
from harness.tools.base import ToolContext
from harness.tools.outbound.registry import outbound_tools
from tests.approval.helpers import CountingServer

BROAD_APPROVE = ('[[rules]]\nname = "broad"\ntool = "*"\ndecision = "approve"\n')
NARROW_DENY = ('[[rules]]\nname = "no-collect"\ntool = "http_request"\ndecision = "deny"\n'
               'match = { url = "http://127\\\\.0\\\\.0\\\\.1:[0-9]+/collect" }\n')
ASK_POSTS = ('[[rules]]\nname = "posts-ask"\ntool = "http_request"\ndecision = "ask"\n'
             'match = { method = "POST" }\n')
GET = {"method": "GET", "url": "http://127.0.0.1:9/collect", "headers": {}, "body": ""}
POST = {"method": "POST", "url": "http://127.0.0.1:9/other", "headers": {}, "body": "x"}


def _policy(tmp_path: Path, *rules: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "policy.toml"
    path.write_text("\n".join(rules))
    return load_policy(path)


@pytest.mark.parametrize("order", list(itertools.permutations([BROAD_APPROVE, NARROW_DENY, ASK_POSTS])))
def test_every_order_of_the_same_rules_decides_the_same(tmp_path: Path, order: tuple[str, ...]) -> None:
    policy = _policy(tmp_path, *order)
    deny = policy.decide("http_request", GET)
    assert (deny.decision, deny.rule) == ("deny", "no-collect")          # a broad approve never overrides a deny
    assert set(deny.matched) == {"broad", "no-collect"} and "it wins over 'broad' (approve)" in deny.reason
    ask = policy.decide("http_request", POST)
    assert (ask.decision, ask.rule) == ("ask", "posts-ask")              # ask over approve
    approve = policy.decide("pip_download", {"requirement": "attrs==23.2.0"})
    assert (approve.decision, approve.rule) == ("approve", "broad")     # positive control: the approve still works


def test_no_rule_matching_asks_a_person() -> None:
    verdict = load_policy(None).decide("http_request", GET)
    assert (verdict.decision, verdict.rule, verdict.matched) == ("ask", None, ())


def test_a_broad_approve_before_a_narrow_deny_sends_nothing_through_the_gate(tmp_path: Path) -> None:
    """The file order that first-match got wrong: the approve came first and let the request out."""
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(BROAD_APPROVE + "\n" + NARROW_DENY)
    config = Config()
    config = config.replace(approval=dataclasses.replace(config.approval, state_dir=tmp_path / "state"))
    gate = ApprovalGate(ApprovalQueue(tmp_path / "state"), load_policy(policy_file), mode="ask", timeout=30,
                        poll_interval=0.05)
    tools = {t.name: t for t in outbound_tools(config)}
    ctx = ToolContext(sandbox=None, session="s1", tool_use_id="t1", approver=gate)  # type: ignore[arg-type]
    with CountingServer() as server:
        with pytest.raises(ApprovalDenied, match=r"denied by policy \(rule no-collect\)"):
            tools["http_request"].function(ctx, url=server.url("/collect"), key="k1")
        assert server.count() == 0
        out = str(tools["http_request"].function(ctx, url=server.url("/elsewhere"), key="k2"))   # positive control
        assert "hit 1 GET /elsewhere" in out and server.count() == 1
    assert [(r.status, r.rule) for r in gate.queue.requests(("denied", "done"))] == [
        ("done", "broad"), ("denied", "no-collect")]


def test_a_first_match_file_loads_and_warns_naming_the_pairs_whose_outcome_changed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="harness.approval.policy"):
        policy = _policy(tmp_path, BROAD_APPROVE, ASK_POSTS, NARROW_DENY)
    assert len(policy.warnings) == 3 and [r.getMessage() for r in caplog.records] == list(policy.warnings)
    assert "rule 'broad' (approve) comes before rule 'no-collect' (deny)" in policy.warnings[1]
    assert "rule 'posts-ask' (ask) comes before rule 'no-collect' (deny)" in policy.warnings[2]
    # the same rules, stricter first, as a file written for strictest-wins: nothing to warn about
    assert _policy(tmp_path, NARROW_DENY, ASK_POSTS, BROAD_APPROVE).warnings == ()
    # tools that cannot overlap: no warning either
    other = NARROW_DENY.replace('"http_request"', '"mcp_time_*"')
    assert _policy(tmp_path, BROAD_APPROVE.replace('"*"', '"pip_*"'), other).warnings == ()

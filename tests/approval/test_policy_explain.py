"""`harness approvals explain REQUEST.json | --id ID`, through the real command line: which rules match, which
one decides and why (strictest wins), grants, --json, and hostile request text escaped."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from harness.approval.gate import ApprovalGate
from harness.approval.policy import load_policy
from harness.approval.queue import ApprovalQueue
from harness.config import Config
from harness.errors import ApprovalDenied
from harness.tools.base import ToolContext
from harness.tools.outbound.registry import outbound_tools
from tests.approval.helpers import REPO

POLICY = '''[[rules]]
name = "docs"
tool = "http_request"
decision = "approve"
match = { method = "GET", url = "https://docs\\\\.python\\\\.org/.*" }

[[rules]]
name = "no-notes"
tool = "http_request"
decision = "deny"
match = { "header.X-Note" = ".+" }
'''


def _explain(tmp_path: Path, *args: str, policy: str = POLICY) -> subprocess.CompletedProcess[str]:
    (tmp_path / "policy.toml").write_text(policy)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HARNESS_APPROVAL_POLICY": str(tmp_path / "policy.toml")}
    return subprocess.run([sys.executable, "-m", "harness.cli.main", "approvals", "--state-dir",
                           str(tmp_path / "state"), "explain", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=60, env=env)


def _request(tmp_path: Path, arguments: Mapping[str, object], tool: str = "http_request",
             name: str = "request.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"tool": tool, "arguments": arguments}))
    return str(path)


def test_explain_names_every_matching_rule_and_the_strictest_that_decides(tmp_path: Path) -> None:
    hostile = {"method": "GET", "url": "https://docs.python.org/3/\x1b[2J\u202e", "headers": {"X-Note": "\x1b]0;x\x07"}}
    out = _explain(tmp_path, _request(tmp_path, hostile))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "rule docs (approve): applies" in text and "rule no-notes (deny): applies" in text
    assert ("decision: deny, by rule no-notes: deny by rule 'no-notes' of " in text
            and "(strictest of 2 matching rules: it wins over 'docs' (approve))" in text)
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text      # escaped, not interpreted
    assert "\\x1b[2J" in text and "\\u202e" in text
    data = json.loads(_explain(tmp_path, _request(tmp_path, hostile), "--json").stdout)
    assert (data["decision"], data["decided_by"]) == ("deny", "rule no-notes")
    assert [(r["name"], r["applies"]) for r in data["rules"]] == [("docs", True), ("no-notes", True)]
    assert data["arguments"]["url"] == hostile["url"]                             # JSON keeps the exact text


def test_explain_says_why_a_rule_does_not_apply_and_who_decides_when_none_does(tmp_path: Path) -> None:
    out = _explain(tmp_path, _request(tmp_path, {"method": "POST", "url": "https://docs.python.org/3/"}))
    assert "rule docs (approve): does not apply" in out.stdout
    assert "match method 'POST' does not match 'GET'" in out.stdout
    assert "decision: ask, by no rule: the run's mode: no rule applies: a person decides" in out.stdout
    approved = _explain(tmp_path, _request(tmp_path, {"method": "GET", "url": "https://docs.python.org/3/"}))
    assert "decision: approve, by rule docs" in approved.stdout                   # positive control


def test_explain_by_id_reads_the_request_as_it_runs_from_the_queue(tmp_path: Path) -> None:
    config = Config()
    config = config.replace(approval=dataclasses.replace(config.approval, state_dir=tmp_path / "state"))
    gate = ApprovalGate(ApprovalQueue(tmp_path / "state"), load_policy(None), mode="deny", timeout=5)
    tools = {t.name: t for t in outbound_tools(config)}
    ctx = ToolContext(sandbox=None, session="s1", tool_use_id="t1", approver=gate)  # type: ignore[arg-type]
    with pytest.raises(ApprovalDenied):
        tools["http_request"].function(ctx, url="https://docs.python.org/3/x", headers={"X-Note": "n"}, key="k")
    out = _explain(tmp_path, "--id", "1", "--json")
    data = json.loads(out.stdout)
    assert data["tool"] == "http_request" and data["arguments"]["headers"] == {"X-Note": "n"}
    assert (data["decision"], data["decided_by"]) == ("deny", "rule no-notes")


def test_explain_refuses_bad_input_saying_what_was_expected(tmp_path: Path) -> None:
    neither = _explain(tmp_path)
    assert neither.returncode == 2 and "give REQUEST.json or --id ID" in neither.stderr
    (tmp_path / "bad.json").write_text("{not json")
    bad = _explain(tmp_path, str(tmp_path / "bad.json"))
    assert bad.returncode == 2 and "cannot read the request" in bad.stderr and '"tool": "http_request"' in bad.stderr
    missing = _explain(tmp_path, "--id", "99")
    assert missing.returncode == 2 and "99" in missing.stderr
    refused = _explain(tmp_path, _request(tmp_path, {}), policy=POLICY + 'examples_match = [{ tool = "x" }]\n')
    assert refused.returncode == 2 and "(rule 'no-notes') examples_match[0]" in refused.stderr


def test_explain_names_the_grants_that_cover_a_request_and_which_decides(tmp_path: Path) -> None:
    queue = ApprovalQueue(tmp_path / "state")
    seen = {"method": "GET", "url": "http://127.0.0.1:9/docs/3/a.html", "headers": {}, "body": ""}
    request, _ = queue.submit(session="s1", scope="run-1", tool="http_request", key="k1", call_args=seen,
                              args=seen, preview="GET http://127.0.0.1:9/docs/3/a.html")
    queue.decide_with_grant(request.id, True, "tester", seen_hash=request.request_hash,
                            shown_rule=queue.derive_grant(request.id, True), scope_kind="run")
    queue.close()
    later = _request(tmp_path, {**seen, "url": "http://127.0.0.1:9/docs/3/b.html"})
    data = json.loads(_explain(tmp_path, later, "--json", policy="").stdout)
    assert [(g["id"], g["decision"]) for g in data["grants"]] == [(1, "approve")]
    assert (data["decision"], data["decided_by"]) == ("approve", "grant G1")
    other = _request(tmp_path, {**seen, "url": "http://127.0.0.1:9/private/x"}, name="other.json")  # not under /docs/3/
    data = json.loads(_explain(tmp_path, other, "--json", policy="").stdout)
    assert data["grants"] == [] and data["decision"] == "ask"
    local = ('[[rules]]\nname = "local-docs"\ntool = "http_request"\ndecision = "approve"\n'
             'match = { url = "http://127.*" }\n')
    ruled = _explain(tmp_path, later, policy=local)
    assert "decision: approve, by rule local-docs" in ruled.stdout and "grant G1 (approve" in ruled.stdout

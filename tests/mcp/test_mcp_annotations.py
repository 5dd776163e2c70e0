"""External MCP tools are gated by what they are: their annotations only ever ask more. A real probe server
process (tests/mcp/probe_server.py) with annotated tools, the scripted model, real sandboxes, the real gate and
an operator policy that approves every probe tool: only a read-only, closed-world tool of a server the operator
trusts (`--mcp-trust`) runs without a person; destructive, open-world, unannotated tools and every tool of an
untrusted server are asked."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.agent.session import run_session
from harness.agent.trajectory import load_trajectory
from harness.approval.explain import explain
from harness.approval.policy import HINT_RULE, load_policy
from harness.approval.queue import ApprovalQueue
from harness.config import ApprovalConfig, Config, LoopConfig, McpConfig
from harness.core.task import Task, load_task
from harness.mcp.client import close_all
from harness.messages import ToolResult
from harness.models.scripted import ScriptedModel

REPO_ROOT = Path(__file__).resolve().parents[2]
PROBE = f"{sys.executable} {Path(__file__).with_name('probe_server.py')}"
LABELS = {"harness.test": "1"}
APPROVE_ALL = '[[rules]]\nname = "probe-all"\ntool = "mcp_probe_*"\ndecision = "approve"\n'
CALLS = ["lookup", "wipe", "web_search", "read_any", "plain"]


@pytest.fixture(autouse=True)
def _fresh_servers() -> Any:
    close_all()
    yield
    close_all()


@pytest.fixture
def task(sandbox_image: str) -> Task:
    return load_task(REPO_ROOT / "tasks" / "wordcount")


def _run(tmp_path: Path, image: str, task: Task, trusted: tuple[str, ...]) -> tuple[list[ToolResult], dict[str, str]]:
    """Each CALLS tool called once under APPROVE_ALL, in queue mode with a person who denies (and records)
    every request that reaches them. Returns the results and, per tool, what the person was shown."""
    (tmp_path / "policy.toml").write_text(APPROVE_ALL)
    cfg = Config()
    config = cfg.replace(sandbox=dataclasses.replace(cfg.sandbox, image=image),
                         loop=dataclasses.replace(LoopConfig(), max_turns=10),
                         approval=ApprovalConfig(state_dir=tmp_path / "state", mode="queue",
                                                 policy_file=tmp_path / "policy.toml", timeout_seconds=60,
                                                 poll_seconds=0.05),
                         mcp=McpConfig(servers={"probe": PROBE}, trusted=trusted))
    queue, asked, done = ApprovalQueue(tmp_path / "state"), {}, threading.Event()

    def person() -> None:
        while not done.is_set():
            for r in queue.requests(("pending",)):
                asked[r.args["tool"]] = " ".join(r.preview.split())      # columns as single spaces
                queue.decide(r.id, False, "a person", "asked, and said no", seen_hash=r.request_hash)
            time.sleep(0.05)

    helper = threading.Thread(target=person)
    helper.start()
    model = ScriptedModel([[{"type": "tool_use", "name": f"mcp_probe_{n}", "input": {"text": n}}] for n in CALLS]
                          + [[{"type": "text", "text": "done"}]])
    try:
        run_session(task, model, config, tmp_path / "run", labels=LABELS)
    finally:
        done.set()
        helper.join()
    results = [r for m in load_trajectory(tmp_path / "run" / "trajectory.jsonl") for r in m.tool_results]
    return results, asked


def _ran(tmp_path: Path) -> list[str]:
    log = (tmp_path / "state" / "mcp-logs" / "probe.log").read_text()
    return [name for name in CALLS if f"call {name} " in log]


@pytest.mark.docker
def test_a_trusted_servers_read_only_tool_is_approved_and_every_other_kind_is_asked(
        task: Task, sandbox_image: str, tmp_path: Path) -> None:
    results, asked = _run(tmp_path, sandbox_image, task, trusted=("probe",))
    by_tool = dict(zip(CALLS, results, strict=True))
    assert not by_tool["lookup"].is_error and "lookup ran" in by_tool["lookup"].content       # positive control
    assert sorted(asked) == sorted(["wipe", "web_search", "read_any", "plain"])
    for name in asked:
        assert by_tool[name].is_error and "denied by a person" in by_tool[name].content
    assert _ran(tmp_path) == ["lookup"]                # nothing a person refused reached the server
    assert "marked destructive (destructiveHint)" in asked["wipe"]
    assert "reaches an open world (marked)" in asked["web_search"]
    assert "open world (by the MCP default, without openWorldHint: false)" in asked["read_any"]
    assert "has no annotations" in asked["plain"]
    assert "server is trusted (--mcp-trust)" in asked["wipe"]
    assert "hints readOnlyHint=false, destructiveHint=true, idempotentHint=unset, openWorldHint=false" \
        in asked["wipe"]
    done = ApprovalQueue(tmp_path / "state").requests(("done",))
    assert [(r.args["tool"], r.rule, r.args["server_trusted"]) for r in done] == [("lookup", "probe-all", True)]


@pytest.mark.docker
def test_an_untrusted_servers_hints_never_skip_a_prompt(task: Task, sandbox_image: str, tmp_path: Path) -> None:
    results, asked = _run(tmp_path, sandbox_image, task, trusted=())
    assert sorted(asked) == sorted(CALLS)                        # read-only lookup included
    assert all(r.is_error for r in results) and _ran(tmp_path) == []
    assert "MCP server 'probe' is not trusted (--mcp-trust probe)" in asked["lookup"]
    assert "server is not trusted: its hints cannot skip a prompt" in asked["lookup"]
    assert "hints readOnlyHint=true, destructiveHint=false, idempotentHint=true, openWorldHint=false" \
        in asked["lookup"]


def _mcp(tool: str, hints: Mapping[str, bool | None], trusted: bool) -> dict[str, Any]:
    full = {"readOnlyHint": None, "destructiveHint": None, "idempotentHint": None, "openWorldHint": None, **hints}
    return {"server": "probe", "tool": tool, "arguments": {}, "hints": full, "server_trusted": trusted}


def test_hints_only_turn_an_approve_into_an_ask_never_a_deny_into_anything(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text(APPROVE_ALL + '[[rules]]\nname = "no-wipe"\ntool = "mcp_probe_wipe"\n'
                                                  'decision = "deny"\n')
    policy = load_policy(tmp_path / "p.toml")
    read_only = {"readOnlyHint": True, "openWorldHint": False}
    assert policy.decide("mcp_probe_lookup", _mcp("lookup", read_only, True)).decision == "approve"
    asked = policy.decide("mcp_probe_lookup", _mcp("lookup", read_only, False))
    assert (asked.decision, asked.rule) == ("ask", HINT_RULE)
    assert asked.reason.startswith("rule 'probe-all' would approve it, but MCP server 'probe' is not trusted")
    wiped = policy.decide("mcp_probe_wipe", _mcp("wipe", {"destructiveHint": True}, True))
    assert (wiped.decision, wiped.rule) == ("deny", "no-wipe")                 # a deny stays a deny
    contradictory = {"readOnlyHint": True, "destructiveHint": True, "openWorldHint": False}
    assert policy.decide("mcp_probe_x", _mcp("x", contradictory, True)).decision == "ask"
    assert policy.decide("mcp_probe_x", {"server": "probe", "tool": "x", "arguments": {}}).decision == "ask"
    no_rule = load_policy(None).decide("mcp_probe_lookup", _mcp("lookup", read_only, True))
    assert (no_rule.decision, no_rule.rule) == ("ask", None)          # trusted read-only: the rules decide
    untrusted = explain(policy, "mcp_probe_lookup", _mcp("lookup", read_only, False))
    assert (untrusted.decision, untrusted.decided_by) == ("ask", "MCP tool hints")


def test_mcp_trust_must_name_a_configured_server(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HARNESS_STATE_DIR": str(tmp_path / "state")}
    out = subprocess.run([sys.executable, "-m", "harness.cli.main", "run", "tasks/wordcount", "--model", "empty",
                          "--mcp", f"probe={PROBE}", "--mcp-trust", "prbe"], capture_output=True, text=True,
                         cwd=REPO_ROOT, env=env, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "--mcp-trust names ['prbe'], which no --mcp (or mcp.servers) starts; configured: ['probe']" in out.stderr

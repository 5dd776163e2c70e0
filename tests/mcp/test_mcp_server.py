"""`harness mcp`: the sandbox served to the official SDK's own client, over stdio and streamable HTTP, as
a separate `harness` process with real sandboxes, real approvals and the operator's folder on disk."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import docker
import httpx2
import mcp_types as types
import pytest
from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from harness.approval.queue import ApprovalQueue
from harness.config import Config
from harness.tools.catalog import default_catalog
from harness.tools.outbound.registry import outbound_tools
from tests.approval.helpers import CountingServer

pytestmark = pytest.mark.docker

CALC = "def add(a, b):\n    return a - b\n"


@pytest.fixture
def project(tmp_path: Path, sandbox_image: str) -> Path:
    root = tmp_path / "shop"
    root.mkdir()
    (root / "calc.py").write_text(CALC)
    (root / "test_calc.py").write_text("from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    return root


def _env(tmp_path: Path) -> dict[str, str]:
    return {"HARNESS_STATE_DIR": str(tmp_path / "state"), "PATH": os.environ["PATH"],
            "HOME": os.environ.get("HOME", str(tmp_path))}


def _params(project: Path, tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "harness.cli.main", "mcp", "--dir", str(project), *extra],
                                 env={**_env(tmp_path), **(env or {})}, cwd=str(tmp_path))


def _text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def _sandboxes(kind: str = "mcp") -> list[Any]:
    """The server's sandboxes now. Listing inspects each container; one removed meanwhile (a session
    ending) makes it fail, so it is asked again."""
    for _ in range(20):
        try:
            return docker.from_env().containers.list(all=True, filters={"label": [f"harness.kind={kind}"]})
        except docker.errors.NotFound:
            time.sleep(0.1)
    raise AssertionError("the sandboxes could not be listed: containers kept vanishing while being listed")


def _servers(project: Path) -> list[str]:
    """The pids of `harness mcp --dir project` processes still running."""
    found = subprocess.run(["pgrep", "-f", f"mcp --dir {project}"], capture_output=True, text=True)
    return found.stdout.split()


def _approve_when_pending(state: Path, found: list[Any], stop: threading.Event) -> None:
    queue = ApprovalQueue(state)
    while not stop.is_set():
        for r in queue.requests(("pending",)):
            found.append(r)
            queue.decide(r.id, True, "a human", seen_hash=r.request_hash)
        time.sleep(0.05)


def test_stdio_catalog_tools_errors_edits_and_the_patch_out_only_through_an_approval(
        project: Path, tmp_path: Path) -> None:
    decided: list[Any] = []
    stop = threading.Event()
    human = threading.Thread(target=_approve_when_pending, args=(tmp_path / "state", decided, stop))

    async def session() -> None:
        async with Client(_params(project, tmp_path, "--approve", "queue")) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            catalog = default_catalog(Config(), extra=outbound_tools(Config()))
            assert set(catalog.tools) | {"propose_changes", "apply_changes"} == set(listed)
            for name, tool in catalog.tools.items():
                assert listed[name].input_schema == tool.parameters and listed[name].description == tool.description
            assert listed["bash"].output_schema is not None and "exit_code" in listed["bash"].output_schema["required"]
            assert listed["view"].annotations.read_only_hint and listed["http_request"].annotations.open_world_hint

            ran = await client.call_tool("bash", {"command": "python -c 'print(1/0)'; echo done"})
            assert not ran.is_error and ran.structured_content is not None     # validated by the SDK
            assert ran.structured_content["exit_code"] == 0 and ran.structured_content["stdout"]["bytes"] == 5
            assert "ZeroDivisionError" in _text(ran)
            failed = await client.call_tool("bash", {"command": "python -m pytest -q test_calc.py"})
            assert not failed.is_error and failed.structured_content["exit_code"] == 1   # a result, not an error
            big = await client.call_tool("bash", {"command": "seq 1 200000"})
            stdout = big.structured_content["stdout"]
            assert stdout["truncated"] and stdout["saved_path"] and stdout["lines"] == 200000
            fetch = "import urllib.request as u; u.urlopen('http://example.com', timeout=3)"
            net = await client.call_tool("bash", {"command": f'python -c "{fetch}"'})
            assert net.structured_content["exit_code"] != 0

            missing = await client.call_tool("view", {"path": "nope.py"})
            assert missing.is_error and "does not exist" in _text(missing) and missing.structured_content is None
            bad = await client.call_tool("bash", {"comand": "ls"})
            assert bad.is_error and "`command` is missing" in _text(bad)
            blind = await client.call_tool("edit", {"path": "calc.py", "old": "a - b", "new": "a + b"})
            assert blind.is_error and "view it first" in _text(blind)
            await client.call_tool("view", {"path": "calc.py"})
            edit = {"path": "calc.py", "old": "a - b", "new": "a + b", "key": "fix-1"}
            first = await client.call_tool("edit", edit)
            assert not first.is_error
            again = await client.call_tool("edit", edit)
            assert not again.is_error and "already" in _text(again)
            tests = await client.call_tool("bash", {"command": "python -m pytest -q test_calc.py"})
            assert tests.structured_content["exit_code"] == 0

            assert project.joinpath("calc.py").read_text() == CALC        # nothing reached the folder yet
            proposed = await client.call_tool("propose_changes", {})
            assert proposed.structured_content["files"] == ["calc.py"]
            assert "+    return a + b" in proposed.structured_content["patch"]
            assert project.joinpath("calc.py").read_text() == CALC
            human.start()
            applied = await client.call_tool("apply_changes", {"key": "apply-1"})
            assert not applied.is_error and "calc.py" in _text(applied), _text(applied)
            assert project.joinpath("calc.py").read_text() == CALC.replace("a - b", "a + b")
            assert len(_sandboxes()) == 1

    try:
        anyio.run(session)
    finally:
        stop.set()
        if human.is_alive():
            human.join()
    assert [r.tool for r in decided] == ["apply_changes"]
    assert "+    return a + b" in decided[0].preview and str(project) in decided[0].preview
    assert _sandboxes() == []        # the session ended: its sandbox is gone


def test_apply_is_refused_when_the_folder_changed_and_denied_requests_write_nothing(project: Path,
                                                                                     tmp_path: Path) -> None:
    async def session(mode: str, change_folder: bool, env: dict[str, str] | None = None) -> str:
        async with Client(_params(project, tmp_path, "--approve", mode, env=env)) as client:
            await client.call_tool("view", {"path": "calc.py"})
            await client.call_tool("edit", {"path": "calc.py", "old": "a - b", "new": "a + b"})
            if change_folder:
                project.joinpath("calc.py").write_text(CALC + "# the operator's own edit\n")
            result = await client.call_tool("apply_changes", {})
            assert result.is_error
            return _text(result)

    denied = anyio.run(session, "deny", False)
    assert "denied" in denied and project.joinpath("calc.py").read_text() == CALC
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rules]]\nname = "apply"\ntool = "apply_changes"\ndecision = "approve"\n')
    refused = anyio.run(session, "deny", True, {"HARNESS_APPROVAL_POLICY": str(policy)})
    assert "not applied" in refused and "calc.py" in refused
    assert project.joinpath("calc.py").read_text() == CALC + "# the operator's own edit\n"


def test_two_concurrent_sessions_get_separate_sandboxes(project: Path, tmp_path: Path) -> None:
    seen: dict[str, str] = {}

    async def session(name: str, gate: anyio.Event, other: anyio.Event) -> None:
        async with Client(_params(project, tmp_path)) as client:
            await client.call_tool("bash", {"command": f"echo {name} > mine.txt"})
            gate.set()
            await other.wait()
            result = await client.call_tool("bash", {"command": "cat mine.txt"})
            seen[name] = _text(result)
            seen[name + "-sandboxes"] = ",".join(sorted(c.labels["harness.session"] for c in _sandboxes()))

    async def both() -> None:
        a, b = anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(session, "alpha", a, b)
            tg.start_soon(session, "beta", b, a)

    anyio.run(both)
    assert "alpha" in seen["alpha"] and "beta" not in seen["alpha"]
    assert "beta" in seen["beta"] and "alpha" not in seen["beta"]
    assert seen["alpha-sandboxes"].count(",") == 1 and seen["alpha-sandboxes"] == seen["beta-sandboxes"]
    assert _sandboxes() == []


def _kill_client_mid_call(project: Path, tmp_path: Path, call: str, *server_args: str) -> None:
    """Run a client of `harness mcp --dir project` in a process of its own, make one bash call, then
    `call` (the text of an awaited call_tool), and SIGKILL the client a second into it: its server sees
    its stdin close. Returns once the server has removed the sandbox and exited."""
    script = tmp_path / "client.py"
    script.write_text(textwrap.dedent(f"""
        import anyio, sys
        from mcp import Client, StdioServerParameters
        params = StdioServerParameters(command={sys.executable!r},
            args=["-m", "harness.cli.main", "mcp", "--dir", {str(project)!r}, *{list(server_args)!r}],
            env={_env(tmp_path)!r})
        async def main():
            async with Client(params) as client:
                await client.call_tool("bash", {{"command": "true"}})
                print("started", flush=True)
                await client.{call}
        anyio.run(main)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=tmp_path,
                            start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
        time.sleep(1.0)
        assert len(_sandboxes()) == 1
        os.kill(proc.pid, signal.SIGKILL)           # the client only: its server sees its stdin close
        proc.wait(timeout=10)
        # The server removes the sandbox, then exits: a moment after the container is gone it may still
        # be finishing (its abandoned call's thread, the interpreter's shutdown), so both are waited for.
        deadline = time.time() + 60
        while (_sandboxes() or _servers(project)) and time.time() < deadline:
            time.sleep(0.2)
        assert _sandboxes() == []
        assert _servers(project) == [], "the server was still running 60 s after its client was killed"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_client_killed_mid_call_leaves_no_container(project: Path, tmp_path: Path) -> None:
    _kill_client_mid_call(project, tmp_path, 'call_tool("bash", {"command": "sleep 300", "timeout": 600})')


def test_client_killed_while_a_call_awaits_approval_withdraws_it_and_the_server_exits(
        project: Path, tmp_path: Path) -> None:
    # Before, the server waited on after its client and sandbox were gone (up to the approval timeout, 600 s),
    # and ran the request from the host if a human approved it meanwhile, for a session that had ended.
    started = time.monotonic()
    _kill_client_mid_call(project, tmp_path, 'call_tool("http_request", {"url": "http://127.0.0.1:9/x", '
                                             '"key": "fetch-1"})', "--approve", "queue")
    assert time.monotonic() - started < 60
    [request] = ApprovalQueue(tmp_path / "state").requests()
    assert (request.status, request.decided_by) == ("expired", "session-ended"), request
    assert "the MCP client's session ended" in request.reason


@pytest.fixture
def http_server(project: Path, tmp_path: Path) -> Iterator[tuple[str, str]]:
    with _serving_http(project, tmp_path, "--idle", "3") as served:
        yield served


@contextlib.contextmanager
def _serving_http(project: Path, tmp_path: Path, *extra: str) -> Iterator[tuple[str, str]]:
    """`harness mcp --http` on a free port: its URL and token; stopped with SIGTERM, leaving no sandbox."""
    token_file = tmp_path / "token"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli.main", "mcp", "--dir", str(project), "--http",
                             "--port", "0", "--token-file", str(token_file), *extra],
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **_env(tmp_path)}, cwd=tmp_path)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/mcp", line)
        assert match, line
        # the port takes connections from the moment it is announced: even with the server stopped right
        # then, the kernel completes the connection (it had announced a bound socket not yet listening)
        proc.send_signal(signal.SIGSTOP)
        try:
            socket.create_connection(("127.0.0.1", int(match.group(1))), timeout=10).close()
        finally:
            proc.send_signal(signal.SIGCONT)
        assert oct(token_file.stat().st_mode & 0o777) == "0o600"
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        yield f"http://127.0.0.1:{match.group(1)}/mcp", token_file.read_text().strip()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    # none of this server's sandboxes is left (other tests' servers may have theirs meanwhile)
    assert [c for c in _sandboxes() if c.labels.get("harness.pid") == str(proc.pid)] == []


def test_http_on_a_port_in_use_is_a_clear_error(project: Path, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ran = subprocess.run([sys.executable, "-m", "harness.cli.main", "mcp", "--dir", str(project), "--http",
                              "--port", str(port)], capture_output=True, text=True,
                             env={**os.environ, **_env(tmp_path)}, cwd=tmp_path, timeout=60)
    assert ran.returncode == 2, ran.stderr
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use; pick another with --port" in ran.stderr
    assert "Traceback" not in ran.stderr


def _http(url: str, token: str | None, session: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if session:
        headers["Harness-Session"] = session
    return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=120))


def test_http_sessions_asking_at_once_both_wait_and_one_that_ends_withdraws_only_its_own(
        project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with CountingServer() as remote, _serving_http(project, tmp_path, "--approve", "queue") as (url, token):
        async def session(name: str, ready: anyio.Event, both: anyio.Event, wait: float | None) -> str:
            async with Client(_http(url, token), mode="legacy") as client:
                await client.call_tool("bash", {"command": "true"})       # its sandbox started
                ready.set()
                await both.wait()
                try:
                    return _text(await client.call_tool("http_request", {"url": remote.url(f"/{name}"), "key": name},
                                                        read_timeout_seconds=wait))
                except Exception as exc:  # noqa: BLE001 - alpha's client gives up waiting, then ends its session
                    return f"gave up: {type(exc).__name__}"

        queue = ApprovalQueue(state)     # the server made it before announcing its URL

        async def run() -> dict[str, str]:
            results: dict[str, str] = {}
            a, b, both = anyio.Event(), anyio.Event(), anyio.Event()

            async def keep(name: str, ready: anyio.Event, wait: float | None) -> None:
                results[name] = await session(name, ready, both, wait)

            async with anyio.create_task_group() as tg:
                tg.start_soon(keep, "alpha", a, 8.0)
                tg.start_soon(keep, "beta", b, None)
                await a.wait()
                await b.wait()
                both.set()
                for _ in range(100):           # both asked at once: both wait (one had failed on the queue)
                    if len(queue.requests()) == 2:
                        break
                    await anyio.sleep(0.1)
                asked = sorted((r.key, r.status) for r in queue.requests())
                assert asked == [("alpha", "pending"), ("beta", "pending")]
                for _ in range(200):           # alpha's client gave up and ended its session (DELETE)
                    alpha = queue.find("http_request", "alpha")
                    if alpha is not None and alpha.status != "pending":
                        break
                    await anyio.sleep(0.1)
                assert alpha is not None and (alpha.status, alpha.decided_by) == ("expired", "session-ended"), alpha
                assert "ended its session" in str(alpha.reason)
                beta = queue.find("http_request", "beta")
                assert beta is not None and beta.status == "pending"
                queue.decide(beta.id, True, "a human", seen_hash=beta.request_hash)
            return results

        results = anyio.run(run)
        assert results["alpha"].startswith("gave up") and "200" in results["beta"], results
        assert remote.count("/beta") == 1 and remote.count("/alpha") == 0


def test_http_needs_the_token_and_gives_each_session_its_own_sandbox(http_server: tuple[str, str]) -> None:
    url, token = http_server
    refused = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                          headers={"Authorization": "Bearer wrong", "Accept": "application/json"})
    assert refused.status_code == 401
    assert httpx2.post(url, json={}).status_code == 401

    async def legacy(name: str, ready: anyio.Event, other: anyio.Event) -> str:
        async with Client(_http(url, token), mode="legacy") as client:
            assert "bash" in {t.name for t in (await client.list_tools()).tools}
            await client.call_tool("bash", {"command": f"echo {name} > mine.txt"})
            ready.set()
            await other.wait()
            return _text(await client.call_tool("bash", {"command": "cat mine.txt"}))

    async def modern(session: str, command: str) -> str:
        async with Client(_http(url, token, session)) as client:
            return _text(await client.call_tool("bash", {"command": command}))

    async def run() -> None:
        results: dict[str, str] = {}
        a, b = anyio.Event(), anyio.Event()

        async def keep(name: str, ready: anyio.Event, other: anyio.Event) -> None:
            results[name] = await legacy(name, ready, other)

        async with anyio.create_task_group() as tg:
            tg.start_soon(keep, "alpha", a, b)
            tg.start_soon(keep, "beta", b, a)
        assert "alpha" in results["alpha"] and "beta" not in results["alpha"] and "beta" in results["beta"]
        # the handshake-era sessions ended (DELETE): their sandboxes are gone
        for _ in range(40):
            if not _sandboxes():
                break
            await anyio.sleep(0.25)
        assert _sandboxes() == []
        # 2026-07-28 requests carry no session: the Harness-Session header names one, kept across connections
        await modern("work-1", "echo kept > note.txt")
        assert "kept" in await modern("work-1", "cat note.txt")
        assert "No such file" in await modern("work-2", "cat note.txt")
        assert len(_sandboxes()) == 2
        for _ in range(60):                     # --idle 3: both removed after 3 s without a call
            if not _sandboxes():
                break
            await anyio.sleep(0.5)
        assert _sandboxes() == []

    anyio.run(run)


def test_structured_content_matches_the_declared_schema_for_every_outcome(project: Path, tmp_path: Path) -> None:
    async def session() -> None:
        async with Client(_params(project, tmp_path)) as client:
            schema = next(t for t in (await client.list_tools()).tools if t.name == "bash").output_schema
            validator = Draft202012Validator(schema)
            for command, timeout in [("true", None), ("exit 3", None), ("sleep 5", 1), ("yes | head -c 3000000", None),
                                     ("sleep 30 & echo bg", None)]:
                args: dict[str, Any] = {"command": command}
                if timeout:
                    args["timeout"] = timeout
                result = await client.call_tool("bash", args)
                assert not result.is_error
                validator.validate(result.structured_content)
                if command.startswith("sleep 5"):
                    assert result.structured_content["timed_out"]
                if "&" in command:
                    assert result.structured_content["killed_leftovers"] >= 1
            assert json.dumps(schema)

    anyio.run(session)


def _run_in(container: Any, command: list[str]) -> tuple[int, bytes] | None:
    """`command` in `container` as the agent, or None when the container went away meanwhile."""
    try:
        done = container.exec_run(command, user="1000:1000")
    except docker.errors.APIError:
        return None
    return done.exit_code, done.output


def _wait_for_pooled(timeout: float = 60) -> set[str]:
    """The ids of the sandboxes whose session is prepared: started, and /workspace made a git repository
    (the last step of the baseline)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        ready = {c.id for c in _sandboxes() if c.status == "running" and (_run_in(
            c, ["git", "-C", "/workspace", "rev-parse", "--verify", "-q", "HEAD"]) or (1, b""))[0] == 0}
        if ready:
            time.sleep(0.5)                 # the host keeps the baseline, then the pool holds it
            return ready
        time.sleep(0.2)
    raise AssertionError(f"no pooled sandbox was prepared within {timeout}s")


def test_a_pooled_sandbox_serves_the_session_and_a_stale_one_is_replaced(project: Path, tmp_path: Path) -> None:
    async def session(change: bool) -> tuple[str, set[str]]:
        async with Client(_params(project, tmp_path, "--pool", "1")) as client:
            pooled = _wait_for_pooled()
            if change:
                project.joinpath("added_meanwhile.py").write_text("X = 1\n")
            listing = _text(await client.call_tool("bash", {"command": "ls; echo served > marker"}))
            served = {c.id for c in _sandboxes()
                      if (_run_in(c, ["cat", "/workspace/marker"]) or (1, b""))[1] == b"served\n"}
            return listing, pooled & served

    listing, pooled_served = anyio.run(session, False)
    assert "calc.py" in listing and pooled_served          # the sandbox started ahead served the session
    listing, pooled_served = anyio.run(session, True)
    assert "added_meanwhile.py" in listing and not pooled_served   # stale: replaced by one holding the new file
    assert _sandboxes() == []


def test_an_apply_key_is_the_sessions_own_and_bound_to_its_patch(project: Path, tmp_path: Path) -> None:
    # Before, keys were global and apply_changes takes no argument: the second folder's session calling
    # `apply_changes key=apply-1` got the first session's stored result, and its change was never queued.
    other = tmp_path / "other"
    other.mkdir()
    (other / "calc.py").write_text(CALC)
    asked: list[Any] = []
    stop = threading.Event()
    human = threading.Thread(target=_approve_when_pending, args=(tmp_path / "state", asked, stop))
    human.start()

    async def session(folder: Path, new: str) -> list[str]:
        async with Client(_params(folder, tmp_path, "--approve", "queue")) as client:
            await client.call_tool("view", {"path": "calc.py"})
            # the editing tools' keys are the session's too (kept in its sandbox): the same edit key in the
            # other session edits its own file
            edited = await client.call_tool("edit", {"path": "calc.py", "old": "a - b", "new": new, "key": "fix-1"})
            assert not edited.is_error and "already" not in _text(edited)
            first = await client.call_tool("apply_changes", {"key": "apply-1"})
            again = await client.call_tool("apply_changes", {"key": "apply-1"})    # same content: stored result
            await client.call_tool("write", {"path": "more.py", "content": "X = 1\n"})
            moved = await client.call_tool("apply_changes", {"key": "apply-1"})    # other content: refused
            assert not first.is_error and not again.is_error and moved.is_error, (_text(first), _text(again))
            return [_text(first), _text(again), _text(moved)]

    try:
        mine = anyio.run(session, project, "a + b")
        theirs = anyio.run(session, other, "b + a")
    finally:
        stop.set()
        human.join()
    for folder, (first, again, moved) in ((project, mine), (other, theirs)):
        assert first == f"applied to {folder}: calc.py", first
        assert "already ran once" in again and f"applied to {folder}: calc.py" in again
        assert moved.startswith("key 'apply-1' already names apply_changes request #") and "made with other " \
               "content: base (sha256" in moved and "patch (sha256" in moved, moved
        assert "Nothing was queued or run for this call" in moved and '"key": "apply-1-2"' in moved
    assert project.joinpath("calc.py").read_text() == CALC.replace("a - b", "a + b")
    assert other.joinpath("calc.py").read_text() == CALC.replace("a - b", "b + a")
    assert not project.joinpath("more.py").exists() and not other.joinpath("more.py").exists()
    assert [(r.tool, r.key) for r in asked] == [("apply_changes", "apply-1")] * 2     # each one asked a human
    assert [str(folder) in r.preview for r, folder in zip(asked, (project, other), strict=True)] == [True, True]
    assert asked[0].scope != asked[1].scope
    done = ApprovalQueue(tmp_path / "state").requests()
    assert sorted(r.status for r in done) == ["done", "done"]


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "t", "version": "1"}}}


def _initialize(url: str, token: str) -> Any:
    return httpx2.post(url, json=INITIALIZE, timeout=60, headers={
        "Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"})


def test_http_caps_its_sessions_and_each_sandbox_s_memory_and_says_how_to_raise_them(
        project: Path, tmp_path: Path) -> None:
    # Before, nothing capped them: 12 initialize calls whose sessions filled /workspace and /tmp held 11.5 GB.
    with _serving_http(project, tmp_path, "--max-sessions", "2", "--memory", "512m") as (url, token):
        first, second, third = (_initialize(url, token) for _ in range(3))
        assert first.status_code == second.status_code == 200, first.text
        assert third.status_code == 503
        error = third.json()["error"]
        assert error["data"] == {"max_sessions": 2, "open": 2}
        assert error["message"].startswith("harness mcp: this new session was refused: 2 session(s) are open, the "
                                           "most this server takes (--max-sessions 2; each sandbox may hold 512m")
        assert "--max-sessions 4" in error["message"] and "DELETE" in error["message"]
        ids = [r.headers["mcp-session-id"] for r in (first, second)]

        async def modern(session: str) -> types.CallToolResult:
            async with Client(_http(url, token, session)) as client:
                return await client.call_tool("bash", {"command": "cat /proc/self/cgroup > /dev/null; echo ran"})

        def mine() -> list[Any]:      # this server's sandboxes (other tests' may be running meanwhile)
            return [c for c in _sandboxes() if c.labels.get("harness.pid") in _servers(project)]

        full = anyio.run(modern, "work-1")       # a session without a handshake counts too: refused, no sandbox
        assert full.is_error and "this new session was refused: 2 session(s) are open" in _text(full)
        assert mine() == []

        def end(session_id: str) -> None:
            ended = httpx2.delete(url, timeout=60, headers={"Authorization": f"Bearer {token}",
                                                            "Mcp-Session-Id": session_id,
                                                            "Mcp-Protocol-Version": "2025-06-18"})
            assert ended.status_code == 200, ended.text

        end(ids[0])
        again = _initialize(url, token)           # room again: accepted
        assert again.status_code == 200 and again.headers["mcp-session-id"] not in ids
        end(ids[1])
        ran = anyio.run(modern, "work-1")
        assert not ran.is_error and "ran" in _text(ran)
        [box] = mine()
        host = box.attrs["HostConfig"]
        assert host["Memory"] == host["MemorySwap"] == 512 << 20
        assert "size=256m" in host["Tmpfs"]["/workspace"] and "size=128m" in host["Tmpfs"]["/tmp"]


def _png() -> bytes:
    """A real 1x1 PNG (signature, IHDR, IDAT, IEND)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


SCRIPT = b"#!/bin/sh\necho looks harmless\x00\necho ran the hidden line\n"
ESCAPES = "notes\n\x1b[2J\x1b]0;owned\x07 cleared \u202eevil\n"


def _binary_changes(client: Client) -> Any:
    b64 = base64.b64encode(_png()).decode()
    command = ("printf '#!/bin/sh\\necho looks harmless\\0\\necho ran the hidden line\\n' > tool.sh && "
               f"chmod +x tool.sh && echo {b64} | base64 -d > logo.png && ./tool.sh")
    return client.call_tool("bash", {"command": command})


def test_binary_changes_are_refused_unless_allowed_and_then_shown_as_escaped_text(project: Path,
                                                                                  tmp_path: Path) -> None:
    # Before, a script with one NUL byte reached the approver as `GIT binary patch ... zcmY#Z...`.
    async def refused() -> tuple[str, str]:
        async with Client(_params(project, tmp_path, "--approve", "queue")) as client:
            ran = _text(await _binary_changes(client))
            result = await client.call_tool("apply_changes", {"key": "bin-1"})
            assert result.is_error
            return ran, _text(result)

    ran, said = anyio.run(refused)
    assert "looks harmless" in ran and "ran the hidden line" in ran      # the script with a NUL byte runs
    assert said.startswith("apply_changes: the patch changes 2 file(s) that git treats as binary (logo.png, "
                           "tool.sh)") and "--allow-binary" in said, said
    assert ApprovalQueue(tmp_path / "state").requests() == []             # nobody was asked
    assert not project.joinpath("tool.sh").exists()

    asked: list[Any] = []
    stop = threading.Event()
    human = threading.Thread(target=_approve_when_pending, args=(tmp_path / "state", asked, stop))
    human.start()

    async def allowed() -> str:
        async with Client(_params(project, tmp_path, "--approve", "queue", "--allow-binary")) as client:
            await _binary_changes(client)
            await client.call_tool("write", {"path": "notes.txt", "content": ESCAPES})
            return _text(await client.call_tool("apply_changes", {"key": "bin-2"}))

    try:
        applied = anyio.run(allowed)
    finally:
        stop.set()
        human.join()
    assert applied.startswith(f"applied to {project}:"), applied
    [request] = asked
    assert "GIT binary patch" in request.args["patch"]                    # what git gives: encoded data
    preview = request.preview
    assert "GIT binary patch" not in preview and "zcmY" not in preview and "literal " not in preview
    assert "binary to git: tool.sh (new file, mode 100755)" in preview
    assert f"becomes: {len(SCRIPT)} bytes, sha256 {hashlib.sha256(SCRIPT).hexdigest()}, 1 NUL byte(s)" in preview
    assert "+echo looks harmless\\x00" in preview and "+echo ran the hidden line" in preview
    assert "binary to git: logo.png (new file, mode 100644)" in preview and "+\\x89PNG\\x0d" in preview
    assert "\\x1b[2J\\x1b]0;owned\\x07 cleared \\u202eevil" in preview       # text: escaped in the diff
    assert not any(ch in preview for ch in "\x00\x1b\x07\u202e")
    assert project.joinpath("tool.sh").read_bytes() == SCRIPT and os.access(project / "tool.sh", os.X_OK)
    assert project.joinpath("logo.png").read_bytes() == _png()
    assert project.joinpath("notes.txt").read_text() == ESCAPES

"""The direct link: the channel moves off `docker exec`'s stream onto a unix socket in a read-only host
folder, without giving the agent anything it did not have (see `sandbox/host_channel.py`)."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

import sandbox.deployment.docker as deployment
import sandbox.host_channel as channel_module
import sandbox.reaper as reaper
from sandbox import _protocol as p
from sandbox.deployment.docker import LINK_DIR
from sandbox.docker_sandbox import DockerSandbox
from sandbox.errors import SandboxError
from sandbox.host_channel import Channel, _accept_token
from sandbox.reaper import links_root, reap_link_folders
from tests.sandbox.conftest import make_spec, processes, run_python


def _connect(path: str, first: bytes = b"") -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    if first:
        s.sendall(first)
    return s


def _listener(tmp_path: Path) -> tuple[socket.socket, str]:
    path = str(tmp_path / "l.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    return listener, path


def test_the_connection_with_the_token_is_taken_and_every_impostor_closed(tmp_path: Path) -> None:
    listener, path = _listener(tmp_path)
    token = "t" * 64
    good = p.encode_frame({"token": token})
    silent = [_connect(path) for _ in range(5)]                      # connect and send nothing
    wrong = _connect(path, p.encode_frame({"token": "x" * 64}))      # a guess of the right length
    real = _connect(path, good)
    t0 = time.monotonic()
    taken = _accept_token(listener, token.encode(), deadline=time.monotonic() + 5)
    assert taken is not None and time.monotonic() - t0 < 2            # the silent ones held nothing up
    taken.sendall(b"ping")
    assert real.recv(4) == b"ping"                                     # the one taken is the real one
    for s in (wrong, *silent):
        s.settimeout(2)
        assert s.recv(10) == b""                                       # closed
    for s in (real, *silent, wrong):
        s.close()
    listener.close()


def test_a_guessed_prefix_of_the_token_is_not_told_whether_it_was_right(tmp_path: Path) -> None:
    listener, path = _listener(tmp_path)
    token = "t" * 64
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(
        _accept_token(listener, token.encode(), deadline=time.monotonic() + 1.0)))
    thread.start()
    right = _connect(path, p.encode_frame({"token": token})[:-1])      # all but the last byte
    wrong = _connect(path, p.encode_frame({"token": "u" * 64})[:-1])
    for s in (right, wrong):   # both left waiting alike until the deadline: no early close tells them apart
        s.settimeout(0.3)
        with pytest.raises(TimeoutError):
            s.recv(10)
    thread.join()
    assert result == [None]
    for s in (right, wrong):
        s.settimeout(2)
        assert s.recv(10) == b""
        s.close()
    listener.close()


def test_no_token_within_the_deadline_gives_none(tmp_path: Path) -> None:
    listener, path = _listener(tmp_path)
    s = _connect(path, p.encode_frame({"token": "y" * 64}))
    assert _accept_token(listener, ("z" * 64).encode(), deadline=time.monotonic() + 0.3) is None
    s.close()
    listener.close()


def test_a_local_daemon_gives_a_direct_channel_through_an_empty_read_only_folder(sandbox_image: str) -> None:
    with DockerSandbox(make_spec(sandbox_image)) as box:
        channel = box._channel
        assert channel is not None and channel.direct, channel.link_refused if channel else None
        link = box.deployment.link
        assert link is not None and link.parent == links_root() and list(link.iterdir()) == []
        assert oct(link.stat().st_mode & 0o777) == "0o711"
        got = run_python(box, f"""
            import os, errno
            print(sorted(os.listdir("{LINK_DIR}")) if os.access("{LINK_DIR}", os.R_OK) else "unlistable")
            try:
                open("{LINK_DIR}/x", "w")
            except OSError as exc:
                print(errno.errorcode[exc.errno])
            line = [l for l in open("/proc/self/mountinfo") if l.split()[4] == "{LINK_DIR}"][0]
            print(line.split()[5])
            print(sorted(os.listdir("/proc/self/fd")))
        """).stdout.text.split("\n")
        assert got[0] == "unlistable" and got[1] in ("EACCES", "EROFS")
        assert got[2].startswith("ro,")                                   # mounted read-only
        assert got[3] == "['0', '1', '2', '3']"                           # no socket inherited by a command
        host = box.container.attrs["HostConfig"]
        assert [(m["Type"], m["Target"], m["ReadOnly"]) for m in host["Mounts"]] == [("bind", LINK_DIR, True)]
        assert box.exec("echo direct", timeout=10).stdout.text == "direct\n"
    assert not link.exists()                                              # removed with the sandbox


def test_the_channel_restarts_direct_and_the_old_server_is_gone(sandbox_image: str) -> None:
    with DockerSandbox(make_spec(sandbox_image)) as box:
        assert box._channel is not None
        old = box._channel.server_pid
        box.restart_channel()
        assert box._channel.direct and box._channel.server_pid != old
        assert not any(f" {old} " in f" {line} " for line in processes(box))
        assert list(box.deployment.link.iterdir()) == []                  # type: ignore[union-attr]
        assert box.exec("echo again", timeout=10).stdout.text == "again\n"


def test_attach_is_refused_over_the_link_itself(sandbox_image: str) -> None:
    with DockerSandbox(make_spec(sandbox_image)) as box:
        assert box._channel is not None and box._channel.direct
        answer = box._channel.request({"op": "attach", "path": "/tmp/x.sock", "token": "0" * 64})
        assert answer["ok"] is False and "stdin only" in answer["error"]["message"]
        assert box.exec("echo still", timeout=10).stdout.text == "still\n"


def test_without_the_link_the_channel_keeps_to_the_exec_stream(sandbox_image: str) -> None:
    spec = make_spec(sandbox_image)
    with DockerSandbox(type(spec)(**{**spec.__dict__, "direct_channel": False})) as box:
        assert box._channel is not None and not box._channel.direct
        assert box._channel.link_refused == "no link folder" and box.deployment.link is None
        assert not box.container.attrs["HostConfig"].get("Mounts")
        assert box.exec("echo stream", timeout=10).stdout.text == "stream\n"


def test_a_server_that_cannot_connect_says_why_and_the_channel_keeps_to_the_stream(sandbox_image: str) -> None:
    with DockerSandbox(make_spec(sandbox_image)) as box:
        assert box.deployment.link is not None and box.container is not None and box._client is not None
        # a link whose container side does not exist: the server's connect fails
        other = Channel(box._client, box.container.id, "1000:1000", dict(box.runtime.env),  # type: ignore[union-attr]
                        (str(box.deployment.link), "/nowhere"))
        try:
            assert not other.direct and "FileNotFoundError" in other.link_refused
            answer = other.call(p.ExecRequest("echo fallback", timeout=10))
            assert isinstance(answer, p.ExecAnswer) and answer.stdout.head == b"fallback\n"
            assert list(box.deployment.link.iterdir()) == []
        finally:
            other.close()


def test_a_host_that_takes_no_connection_sends_the_server_back_to_the_stream(sandbox_image: str,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channel_module, "_accept_token", lambda *_a, **_k: None)
    with DockerSandbox(make_spec(sandbox_image)) as box:
        assert box._channel is not None and not box._channel.direct
        assert "token" in box._channel.link_refused
        assert box.exec("echo back on the stream", timeout=10).stdout.text == "back on the stream\n"


def test_link_folders_of_dead_owners_are_reaped_and_live_ones_kept(tmp_path: Path) -> None:
    root = links_root()
    root.mkdir(exist_ok=True)
    dead = root / "999999999-harness-test-dead"
    live = root / f"{os.getpid()}-harness-test-live"
    dead.mkdir()
    live.mkdir()
    try:
        reap_link_folders()
        assert not dead.exists() and live.exists()
    finally:
        for f in (dead, live):
            if f.exists():
                f.rmdir()


def test_a_link_root_that_is_not_a_folder_of_ours_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / f"harness-links-{os.getuid()}").symlink_to(target)
    monkeypatch.setattr(reaper.tempfile, "gettempdir", lambda: str(tmp_path))
    with pytest.raises(SandboxError, match="not a folder of ours"):
        deployment.make_link_folder("x")
    reap_link_folders(everything=True)                                    # does not follow it either
    assert target.exists()


def test_a_link_root_others_may_write_to_is_not_used_and_the_sandbox_keeps_to_the_stream(
        sandbox_image: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = tmp_path / f"harness-links-{os.getuid()}"
    root.mkdir()
    root.chmod(0o777)    # another local user could swap our folder for a link
    monkeypatch.setattr(reaper.tempfile, "gettempdir", lambda: str(tmp_path))
    with DockerSandbox(make_spec(sandbox_image)) as box:
        assert box._channel is not None and not box._channel.direct
        assert "not a folder of ours" in box._channel.link_refused and box.deployment.link is None
        assert box.exec("echo stream", timeout=10).stdout.text == "stream\n"
    assert list(root.iterdir()) == []


def test_concurrent_sandboxes_each_get_their_own_link(sandbox_image: str) -> None:
    boxes: list[DockerSandbox] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            box = DockerSandbox(make_spec(sandbox_image))
            box.start()
            boxes.append(box)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert not errors, errors
        assert all(b._channel is not None and b._channel.direct for b in boxes)
        assert len({b.deployment.link for b in boxes}) == 3
        assert [b.exec(f"echo {i}", timeout=10).stdout.text for i, b in enumerate(boxes)] == ["0\n", "1\n", "2\n"]
    finally:
        for b in boxes:
            b.close()

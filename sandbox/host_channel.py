"""The exec channel's host end: one `docker exec` kept open for the whole session.

The in-sandbox end is the `sandbox/server` package. Requests and answers are frames of the protocol
in `sandbox/_protocol.py` (4-byte big-endian length + JSON), shared by both ends, carried over the
exec's stdin and stdout. Without a TTY, Docker multiplexes the exec's output: each piece comes with an
8-byte header (stream id, 3 zero bytes, 4-byte big-endian size), which is undone here. What the
server writes to stderr is kept (bounded) to explain a crash.

The direct link. Every byte of that stream is copied by the Docker daemon and its container shim,
most of a trivial command's round trip. When the container was given a link folder (an empty host
folder bound read-only into it, see `sandbox/deployment/docker.py`), the channel moves onto a unix
socket in it: the host listens on a new, randomly named socket there, sends its path and a random
token to the server over the exec's stdin (which nothing else in the container can write or read),
the server connects and sends the token back as the connection's first frame, and the host takes the
connection that carries it (any other is closed unread). The socket file is then removed and the
listener closed, so the folder is empty again before the first command runs. If anything fails
(a daemon on another machine, SELinux, a folder the daemon cannot see), the channel keeps to the
exec stream and says why in `link_refused`.
"""

from __future__ import annotations

import hmac
import os
import secrets
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import docker

from sandbox import _protocol as protocol
from sandbox.errors import ChannelClosed, ChannelError

SERVER_PATH = "/opt/harness/channel"   # a folder whose __main__.py runs the server (see sandbox/image)


class Channel:
    """A framed request/response channel to the server process inside a container."""

    def __init__(self, client: docker.DockerClient, container_id: str, user: str, env: dict[str, str],
                 link: tuple[str, str] | None = None) -> None:
        """Start the server; `link`: (host folder, the same folder's path in the container) to move onto.

        Raises:
            ChannelError: the server did not start.
        """
        self._api = client.api
        self._lock = threading.Lock()
        self._stdout = bytearray()
        self._stderr = bytearray()
        self._broken = ""   # why the channel stopped being usable, once it has
        self.exec_id, self._sock, self._wrapped = open_exec(client, container_id, [], user, env)
        self._sock.settimeout(30)
        frame = self._read_frame()
        try:
            hello = protocol.hello_from_dict(frame)
        except protocol.FrameError as exc:
            raise ChannelError(f"the channel server did not start: {frame!r}") from exc
        if not hello.ready:
            raise ChannelError(f"the channel server did not start: {frame!r}")
        self.server_pid = hello.pid
        self.guarded = hello.guarded   # the agent cannot reach the server through /proc
        self._link: socket.socket | None = None   # the direct link, once attached
        self.link_refused = "" if link else "no link folder"   # why the channel keeps to the exec stream
        if link is not None:
            self._attach(*link)

    @property
    def direct(self) -> bool:
        """Whether frames travel over the direct link rather than the exec stream."""
        return self._link is not None

    def _attach(self, host_dir: str, container_dir: str) -> None:
        name = f"{secrets.token_hex(12)}.sock"
        token = secrets.token_hex(32)
        path = os.path.join(host_dir, name)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(path)
            os.chmod(path, 0o666)   # the agent's user in the container connects; the token tells who did
            listener.listen(16)
            request = protocol.AttachRequest(path=f"{container_dir}/{name}", token=token)
            self._sock.sendall(protocol.encode_frame(protocol.request_to_dict(request)))
            answer = protocol.answer_from_dict(protocol.Op.ATTACH, self._read_frame())
            if isinstance(answer, protocol.RemoteError):   # a server older than the link
                self.link_refused = f"the server does not attach: {answer.type}: {answer.message}"
                return
            if not isinstance(answer, protocol.AttachAnswer) or not answer.attached:
                self.link_refused = f"the server could not connect: {getattr(answer, 'reason', answer)}"
                return
            self._link = _accept_token(listener, token.encode(), deadline=time.monotonic() + 5)
            if self._link is None:
                # the server waits on a socket nobody will write to: closing ours sends it back to stdin
                self.link_refused = "no connection carried the token within 5 s"
        except (OSError, protocol.FrameError, TypeError) as exc:
            self.link_refused = f"{type(exc).__name__}: {exc}"
        finally:
            listener.close()
            try:
                os.unlink(path)
            except OSError:
                pass
        if self._link is not None:
            threading.Thread(target=self._keep_stderr, name="channel-stderr", daemon=True).start()

    def _keep_stderr(self) -> None:
        """Once on the direct link, only the server's stderr still comes over the exec stream: keep reading
        it (bounded), so that the server never blocks on a full pipe and a crash can be explained."""
        try:
            self._sock.settimeout(None)
            while True:
                self._read_multiplexed()
        except (OSError, ChannelClosed, ValueError):
            return

    def call(self, request: protocol.Request, timeout: float | None = 30.0) -> protocol.Answer | protocol.RemoteError:
        """Send one typed request and wait for its typed answer, or the error the operation raised.

        Raises:
            ChannelClosed: the server died or the answer did not come within `timeout` seconds.
            ChannelError: the answer is not the shape of the protocol's answer to `request`.
        """
        answer = self.request(protocol.request_to_dict(request), timeout)
        try:
            return protocol.answer_from_dict(protocol.OPS[type(request)], answer)
        except (protocol.FrameError, TypeError, ValueError) as exc:
            raise ChannelError(f"the channel server answered a {type(request).__name__} with a frame "
                               f"the protocol does not allow: {exc}") from exc

    def request(self, payload: dict[str, Any], timeout: float | None = 30.0) -> dict[str, Any]:
        """Send one request, given as the dict of its frame (`{"op": ..., <fields>}`), and wait for its
        answer's dict (see `sandbox/_protocol.py`; `call` does the same with typed values).

        Raises:
            ChannelError: `payload` is not a request of the protocol (nothing was sent).
            ChannelClosed: the server died or the answer did not come within `timeout` seconds.
        """
        try:
            protocol.check_request(payload)
        except protocol.FrameError as exc:
            raise ChannelError(f"not a channel request: {exc}") from exc
        frame = protocol.encode_frame(payload)
        with self._lock:
            if self._broken:
                raise ChannelClosed(f"the exec channel failed earlier ({self._broken}); an answer may still be "
                                    "on its way, so it is not used again: call restart_channel()")
            try:
                if self._link is not None:
                    self._link.settimeout(timeout)
                    self._link.sendall(frame)
                    return self._read_link_frame()
                self._sock.settimeout(timeout)
                self._sock.sendall(frame)
                return self._read_frame()
            except (TimeoutError, OSError) as exc:
                self._broken = f"{type(exc).__name__}: {exc}"
                raise ChannelClosed(f"the exec channel stopped answering ({type(exc).__name__}: {exc})"
                                    f"{self._stderr_note()}") from exc
            except ChannelClosed as exc:
                self._broken = str(exc)
                raise

    def close(self) -> None:
        for sock in (self._link, self._sock):
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        for closer in (self._link.close if self._link is not None else None, self._sock.close,
                       getattr(self._wrapped, "close", None)):
            if closer is not None:
                try:
                    closer()
                except OSError:
                    pass

    def _stderr_note(self) -> str:
        text = bytes(self._stderr[-2000:]).decode("utf-8", "replace").strip()
        return f"; the server's last words: {text}" if text else ""

    def _read_frame(self) -> dict[str, Any]:
        header = protocol.HEADER.size
        while len(self._stdout) < header:
            self._read_multiplexed()
        try:
            size = protocol.frame_size(bytes(self._stdout[:header]))
        except protocol.FrameError as exc:
            raise ChannelClosed(f"the exec channel is out of sync and must be restarted: {exc}") from exc
        while len(self._stdout) < header + size:
            self._read_multiplexed()
        body = bytes(self._stdout[header:header + size])
        del self._stdout[:header + size]
        return protocol.decode_body(body)

    def _read_link_frame(self) -> dict[str, Any]:
        assert self._link is not None
        header = _recv_exact(self._link, protocol.HEADER.size, self._stderr_note)
        try:
            size = protocol.frame_size(header)
        except protocol.FrameError as exc:
            raise ChannelClosed(f"the exec channel is out of sync and must be restarted: {exc}") from exc
        return protocol.decode_body(_recv_exact(self._link, size, self._stderr_note))

    def _read_multiplexed(self) -> None:
        stream, data = read_piece(self._sock, self._stderr_note)
        if stream == 2:
            self._stderr += data
            del self._stderr[:-8192]
        else:
            self._stdout += data

    def _recv_exact(self, n: int) -> bytes:
        return _recv_exact(self._sock, n, self._stderr_note)


def open_exec(client: docker.DockerClient, container_id: str, args: list[str], user: str,
              env: dict[str, str]) -> tuple[str, socket.socket, Any]:
    """Start `python3 -I -S -u SERVER_PATH *args` in the container (the channel server, or with `relay PORT`
    the loopback relay) with its stdin, stdout and stderr on one socket: (exec id, the socket, docker-py's
    wrapper of it, to close with it). Without a TTY its output comes multiplexed (`read_piece`)."""
    exec_id = client.api.exec_create(container_id, ["python3", "-I", "-S", "-u", SERVER_PATH, *args], stdin=True,
                                     stdout=True, stderr=True, user=user, environment=env, workdir="/")["Id"]
    wrapped = client.api.exec_start(exec_id, socket=True)
    sock: socket.socket = getattr(wrapped, "_sock", wrapped)  # type: ignore[arg-type]  # docker-py hands back a SocketIO wrapping the socket
    return exec_id, sock, wrapped


def read_piece(sock: socket.socket, note: Callable[[], str]) -> tuple[int, bytes]:
    """The next piece of an exec's multiplexed output: its stream (1 stdout, 2 stderr) and bytes. Docker sends
    each with an 8-byte header: the stream id, 3 zero bytes, the size (4 bytes, big-endian).

    Raises:
        ChannelClosed: the stream ended (the process exited, or the container stopped); `note()` is added.
    """
    header = _recv_exact(sock, 8, note)
    return header[0], _recv_exact(sock, struct.unpack(">I", header[4:])[0], note)


def _recv_exact(sock: socket.socket, n: int, note: Any) -> bytes:
    parts = bytearray()
    while len(parts) < n:
        chunk = sock.recv(min(n - len(parts), 1 << 20))
        if not chunk:
            raise ChannelClosed("the exec channel closed: its server process exited or the container "
                                f"stopped{note()}")
        parts += chunk
    return bytes(parts)


def _accept_token(listener: socket.socket, token: bytes, deadline: float) -> socket.socket | None:
    """The first connection to `listener` whose first frame is `{"token": token}`; every other one is closed.

    Connections are read side by side without blocking, so one that sends nothing holds up no other;
    at most 16 are kept open at once."""
    listener.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    pending: dict[socket.socket, bytearray] = {}
    expected = protocol.encode_frame({"token": token.decode()})
    try:
        while (left := deadline - time.monotonic()) > 0:
            for key, _ in sel.select(left):
                if key.data is None:
                    try:
                        conn, _addr = listener.accept()
                    except (BlockingIOError, InterruptedError):
                        continue
                    if len(pending) >= 16:
                        conn.close()
                        continue
                    conn.setblocking(False)
                    pending[conn] = bytearray()
                    sel.register(conn, selectors.EVENT_READ, pending[conn])
                    continue
                conn = key.fileobj  # type: ignore[assignment]
                buf: bytearray = key.data
                try:
                    chunk = conn.recv(len(expected) - len(buf))
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    chunk = b""
                buf += chunk
                if chunk and len(buf) < len(expected):
                    continue   # compared whole, never by prefix: no early close tells a guess it was wrong
                sel.unregister(conn)
                del pending[conn]
                if chunk and hmac.compare_digest(bytes(buf), expected):
                    conn.setblocking(True)
                    return conn
                conn.close()
        return None
    finally:
        for conn in pending:
            conn.close()
        sel.close()

"""The exec channel's host end: one `docker exec` kept open for the whole session.

The in-sandbox end is the `sandbox/server` package. Requests and answers are frames of the protocol
in `sandbox/_protocol.py` (4-byte big-endian length + JSON), shared by both ends, carried over the
exec's stdin and stdout. Without a TTY, Docker multiplexes the exec's output: each piece comes with an
8-byte header (stream id, 3 zero bytes, 4-byte big-endian size), which is undone here. What the
server writes to stderr is kept (bounded) to explain a crash.
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any

import docker

from sandbox import _protocol as protocol
from sandbox.errors import ChannelClosed, ChannelError

SERVER_PATH = "/opt/harness/channel"   # a folder whose __main__.py runs the server (see sandbox/image)


class Channel:
    """A framed request/response channel to the server process inside a container."""

    def __init__(self, client: docker.DockerClient, container_id: str, user: str, env: dict[str, str]) -> None:
        self._api = client.api
        self._lock = threading.Lock()
        self._stdout = bytearray()
        self._stderr = bytearray()
        self._broken = ""   # why the channel stopped being usable, once it has
        self.exec_id = self._api.exec_create(container_id, ["python3", "-I", "-S", "-u", SERVER_PATH], stdin=True,
                                             stdout=True, stderr=True, user=user, environment=env,
                                             workdir="/")["Id"]
        wrapped = self._api.exec_start(self.exec_id, socket=True)
        self._sock: socket.socket = getattr(wrapped, "_sock", wrapped)  # type: ignore[arg-type]  # docker-py hands back a SocketIO wrapping the socket
        self._wrapped = wrapped
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
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        for closer in (self._sock.close, getattr(self._wrapped, "close", None)):
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

    def _read_multiplexed(self) -> None:
        header = self._recv_exact(8)
        stream, size = header[0], struct.unpack(">I", header[4:])[0]
        data = self._recv_exact(size)
        if stream == 2:
            self._stderr += data
            del self._stderr[:-8192]
        else:
            self._stdout += data

    def _recv_exact(self, n: int) -> bytes:
        parts = bytearray()
        while len(parts) < n:
            chunk = self._sock.recv(min(n - len(parts), 1 << 20))
            if not chunk:
                raise ChannelClosed("the exec channel closed: its server process exited or the container "
                                    f"stopped{self._stderr_note()}")
            parts += chunk
        return bytes(parts)

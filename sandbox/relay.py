"""The loopback relay's host end: HTTP requests made inside a sandbox to a port on its own 127.0.0.1,
answered by a handler on the host (see docs/sandbox.md, "The loopback relay").

The in-sandbox end (`sandbox/server/relay.py`) runs in its own `docker exec`, as `nobody` rather than
the agent: the agent can neither signal it nor read its memory or file descriptors, nor take its port.
It sends each request it reads as a frame (`sandbox/_protocol.py`'s framing) over the exec's stdout;
a reader thread here checks the frame, hands the request to `handler` on a small thread pool (several
may be in flight) and writes the answer frame to the exec's stdin under a lock.

Every frame from the sandbox is hostile: its size is bounded, each field checked (`_request`). A frame
that fails is not answered: the relay ends (`error` says why, logged through `sandbox.text.escape_unsafe`)
and the clients inside see their connections close. A handler that raises answers 500 with no detail.
"""

from __future__ import annotations

import base64
import binascii
import logging
import socket
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeGuard

import docker
import docker.errors

from sandbox import _protocol as protocol
from sandbox.errors import ChannelClosed, RelayError
from sandbox.host_channel import open_exec, read_piece
from sandbox.loopback import HttpHandler, HttpRequest, HttpResponse
from sandbox.text import escape_unsafe

RELAY_USER = "65534:65534"   # nobody: not the agent (1000), so it can neither signal the relay nor take its port
MAX_HEAD = 64 * 1024         # the relay's bounds (sandbox/server/relay.py): request line and headers,
MAX_BODY = 32 * 1024 * 1024  # and body
MAX_ANSWER_BODY = 64 * 1024 * 1024   # the largest body a handler may answer with
MAX_FRAME = MAX_BODY + 8 * MAX_HEAD  # a request frame: the body raw, the head as JSON (escapes grow it)
MAX_IN_FLIGHT = 64           # the relay serves 32 connections, each with one request waiting at most
STDERR_KEPT = 8192
HTTP_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
INTERNAL_ERROR = HttpResponse(500, "Internal Server Error", (("Content-Type", "text/plain"),), b"internal error\n")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RelayStats:
    """What a relay did so far: requests answered by the handler, requests the relay inside answered itself
    (malformed, oversized), handler failures (answered 500), and body bytes in (requests) and out (answers)."""

    requests: int = 0
    refused: int = 0
    handler_errors: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


class Relay:
    """One port on a sandbox's loopback served by `handler`. A context manager; `close()` is idempotent."""

    def __init__(self, client: docker.DockerClient, container_id: str, port: int, handler: HttpHandler, *,
                 env: Mapping[str, str], workers: int = 8, start_timeout: float = 30.0) -> None:
        """Start the relay inside and wait until it listens.

        Raises:
            RelayError: the port is not 1-65535 or is taken inside, or the relay did not start (the
                container is gone, among the reasons).
        """
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise RelayError(f"loopback port {port!r} is not a port number; expected an int 1-65535, e.g. 8000")
        self.port, self.handler, self.container_id = port, handler, container_id
        self._api = client.api
        self._stdout, self._stderr = bytearray(), bytearray()
        self._write_lock, self._state_lock = threading.Lock(), threading.Lock()
        self._in_flight: set[int] = set()
        self._counts = {"requests": 0, "refused": 0, "handler_errors": 0, "bytes_in": 0, "bytes_out": 0}
        self._closed = False
        self._close_done = threading.Event()    # set once the first close() has waited for (or killed) the exec
        self.error = ""   # why the relay ended by itself, once it has
        try:
            self.exec_id, self._sock, self._wrapped = open_exec(client, container_id, ["relay", str(port)],
                                                                RELAY_USER, dict(env))
        except docker.errors.APIError as exc:
            raise RelayError(f"the loopback relay for port {port} could not be started in container "
                             f"{container_id[:12]}: {escape_unsafe(str(exc))}") from exc
        try:
            self.pid, self.guarded, self.ipv6 = self._ready(start_timeout)
        except BaseException:
            self._close_socket()
            raise
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"relay-{port}")
        self._reader = threading.Thread(target=self._read_loop, name=f"relay-{port}-reader", daemon=True)
        self._reader.start()

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        """Whether it still serves: not closed, and not ended by itself."""
        return not self._closed and not self.error

    def stats(self) -> RelayStats:
        with self._state_lock:
            return RelayStats(**self._counts)

    # ---- start and end ---------------------------------------------------------------------
    def _ready(self, timeout: float) -> tuple[int, bool, bool]:
        self._sock.settimeout(timeout)
        try:
            frame = self._next_frame()
        except (OSError, ChannelClosed, ValueError) as exc:
            raise RelayError(f"the loopback relay for port {self.port} did not start: "
                             f"{escape_unsafe(str(exc))}{self._stderr_note()}") from exc
        if frame is None or frame.get("kind") != "ready":
            raise RelayError(f"the loopback relay for port {self.port} did not start: it sent "
                             f"{escape_unsafe(repr(frame))[:500]} instead of its ready frame{self._stderr_note()}")
        if frame.get("ready") is not True:
            raise RelayError(escape_unsafe(str(frame.get("error")))[:2000])
        pid, guarded, ipv6 = frame.get("pid"), frame.get("guarded"), frame.get("ipv6")
        if not (_is_int(pid) and isinstance(guarded, bool) and isinstance(ipv6, bool)
                and frame.get("port") == self.port):
            raise RelayError(f"the loopback relay's ready frame is malformed: {escape_unsafe(repr(frame))[:500]}")
        self._sock.settimeout(None)
        return pid, guarded, ipv6

    def close(self, wait: float = 5.0) -> None:
        """End the relay: its stdin closes, it stops listening and exits; its exec is waited for (`wait`
        seconds), then killed. Requests still in flight are answered 503 inside. Idempotent: a later call
        (the relay ended on its own, from its reader thread) returns once the first has finished."""
        with self._state_lock:
            first, self._closed = not self._closed, True
        if not first:
            if threading.current_thread() is not self._reader:
                self._close_done.wait(2 * wait + 5)
            return
        try:
            self._sock.shutdown(socket.SHUT_WR)   # the relay inside reads the end of its stdin and exits
        except OSError:
            pass
        try:
            if threading.current_thread() is not self._reader:
                self._reader.join(wait)
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._close_socket()
            if not self._exec_ended(wait):
                self._kill_shim()
        finally:
            self._close_done.set()

    def _close_socket(self) -> None:
        for closer in (self._sock.close, getattr(self._wrapped, "close", None)):
            if closer is not None:
                try:
                    closer()
                except OSError:
                    pass

    def _exec_ended(self, wait: float) -> bool:
        deadline = time.monotonic() + wait
        while True:
            try:
                if not self._api.exec_inspect(self.exec_id).get("Running"):
                    return True
            except docker.errors.NotFound:
                return True   # the container is gone, and the exec with it
            except docker.errors.APIError as exc:
                log.warning("the loopback relay's exec could not be inspected: %s", escape_unsafe(str(exc)))
                return False
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def _kill_shim(self) -> None:
        try:
            kill = self._api.exec_create(self.container_id, ["kill", "-KILL", str(self.pid)], user=RELAY_USER)
            self._api.exec_start(kill["Id"])
        except docker.errors.APIError as exc:
            log.warning("the loopback relay (pid %d) did not exit and could not be killed: %s", self.pid,
                        escape_unsafe(str(exc)))

    def _fail(self, why: str) -> None:
        if not self._closed:
            self.error = why
            log.error("the loopback relay for port %d ended: %s", self.port, escape_unsafe(why))
        self.close()

    # ---- frames ----------------------------------------------------------------------------
    def _stderr_note(self) -> str:
        text = escape_unsafe(bytes(self._stderr[-2000:]).decode("utf-8", "replace").strip())
        return f"; the relay's last words: {text}" if text else ""

    def _fill(self, n: int) -> bool:
        """Read the exec's output until `n` bytes of stdout are buffered; False at its end."""
        while len(self._stdout) < n:
            try:
                stream, data = read_piece(self._sock, self._stderr_note)
            except ChannelClosed:
                return False
            if stream == 2:
                self._stderr += data
                del self._stderr[:-STDERR_KEPT]
            elif stream == 1:
                self._stdout += data
            else:
                raise protocol.FrameError(f"the exec's output holds a piece of stream {stream}; expected 1 or 2")
        return True

    def _next_frame(self) -> dict[str, Any] | None:
        """The next frame of the relay's stdout, or None at its end. Raises FrameError (too large, not JSON)."""
        if not self._fill(protocol.HEADER.size):
            return None
        (size,) = protocol.HEADER.unpack(bytes(self._stdout[:protocol.HEADER.size]))
        if size > MAX_FRAME:
            raise protocol.FrameError(f"a frame of {size} bytes exceeds the relay's {MAX_FRAME}")
        end = protocol.HEADER.size + size
        if not self._fill(end):
            return None
        body = bytes(self._stdout[protocol.HEADER.size:end])
        del self._stdout[:end]
        return protocol.decode_body(body)

    def _read_loop(self) -> None:
        try:
            while (frame := self._next_frame()) is not None:
                kind = frame.get("kind")
                if kind == "request":
                    rid, request = self._request(frame)
                    self._pool.submit(self._serve, rid, request)
                elif kind == "refused" and set(frame) == {"kind", "status", "reason"}:
                    with self._state_lock:
                        self._counts["refused"] += 1
                    log.info("the loopback relay answered a request itself: %s %s", frame.get("status"),
                             escape_unsafe(str(frame.get("reason")))[:500])
                else:
                    raise protocol.FrameError(f"a frame of kind {escape_unsafe(repr(kind))[:80]} with the fields "
                                              f"{sorted(map(str, frame))[:10]}; expected a request or refused frame")
            self._fail(f"its process exited{self._stderr_note()}")
        except (OSError, ValueError, RuntimeError) as exc:   # FrameError, JSON and base64 errors are ValueErrors
            self._fail(f"{type(exc).__name__}: {exc}")

    def _request(self, frame: dict[str, Any]) -> tuple[int, HttpRequest]:
        """The request of a frame whose every field was checked. Raises FrameError."""
        wrong = sorted(set(frame) ^ {"kind", "id", "method", "target", "headers", "data"})
        rid, method, target, headers, data = (frame.get(k) for k in ("id", "method", "target", "headers", "data"))
        if isinstance(data, str):
            try:
                data = base64.b64decode(data, validate=True)
            except binascii.Error:
                data = None
        problems = [f"fields {wrong} unknown or missing"] if wrong else []
        if not (_is_int(rid) and 0 < rid < 1 << 53):
            problems.append(f"id {rid!r} is not a positive int")
        if not (isinstance(method, str) and 0 < len(method) <= 64 and set(method) <= HTTP_TOKEN):
            problems.append(f"method {method!r} is not an HTTP token")
        if not (isinstance(target, str) and 0 < len(target) <= MAX_HEAD and target.isprintable() and " " not in target):
            problems.append("target is not a non-empty string without spaces or controls")
        pairs = _header_pairs(headers)
        if pairs is None:
            problems.append("headers are not a list of [name, value] pairs of at most 64 KiB")
        if not (isinstance(data, bytes) and len(data) <= MAX_BODY):
            problems.append(f"data is not bytes (raw or base64) of at most {MAX_BODY}")
        with self._state_lock:
            if not problems and (rid in self._in_flight or len(self._in_flight) >= MAX_IN_FLIGHT):
                problems.append(f"id {rid} is in flight already, or {MAX_IN_FLIGHT} requests are")
            if problems or not isinstance(rid, int) or not isinstance(data, bytes) or pairs is None:
                raise protocol.FrameError(f"a request frame is malformed: {'; '.join(problems)}")
            self._in_flight.add(rid)
            self._counts["bytes_in"] += len(data)
        return rid, HttpRequest(method=str(method), target=str(target), headers=pairs, body=data)

    def _serve(self, rid: int, request: HttpRequest) -> None:
        try:
            response = self.handler(request)
            problem = _response_problem(response)
        except Exception as exc:  # noqa: BLE001 - the handler's failure is the client's 500, logged and counted
            response, problem = INTERNAL_ERROR, f"it raised {type(exc).__name__}: {exc}"
        if problem:
            log.error("the loopback handler for port %d failed on %s %s: %s", self.port,
                      escape_unsafe(request.method), escape_unsafe(request.target[:200]), escape_unsafe(problem[:1000]))
            response = INTERNAL_ERROR
        frame = protocol.encode_frame({"kind": "response", "id": rid, "status": response.status,
                                       "reason": response.reason, "headers": [list(h) for h in response.headers],
                                       "data": response.body})
        with self._state_lock:
            self._in_flight.discard(rid)
            self._counts["requests"] += 1
            self._counts["handler_errors"] += bool(problem)
            self._counts["bytes_out"] += len(response.body)
        try:
            with self._write_lock:
                self._sock.sendall(frame)
        except OSError as exc:
            if not self._closed:
                self._fail(f"the answer to request {rid} could not be sent: {exc}")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _header_pairs(headers: object) -> tuple[tuple[str, str], ...] | None:
    """`headers` of a frame as pairs, or None when they are not a list of [token, text] pairs within MAX_HEAD."""
    if not isinstance(headers, list) or len(headers) > MAX_HEAD // 4:
        return None
    pairs = []
    for pair in headers:
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            return None
        name, value = pair
        if not name or not set(name) <= HTTP_TOKEN:
            return None
        pairs.append((str(name), str(value)))
    return tuple(pairs) if sum(len(n) + len(v) for n, v in pairs) <= MAX_HEAD else None


def _response_problem(response: object) -> str:
    """Why a handler's answer cannot be sent (a status line or header that could split the response), or ""."""
    if not isinstance(response, HttpResponse):
        return f"it returned {type(response).__name__}, not an HttpResponse"
    if not _is_int(response.status) or not 200 <= response.status <= 599:
        return f"status {response.status!r} is not an int 200-599"
    if not isinstance(response.headers, tuple) or any(
            not isinstance(pair, tuple) or len(pair) != 2 for pair in response.headers):
        return "headers are not a tuple of (name, value) pairs"
    texts = [response.reason, *(x for pair in response.headers for x in pair)]
    if not all(isinstance(t, str) and t.isprintable() for t in texts):
        return "the reason or a header is not printable text (a line end or control character)"
    try:
        "".join(texts).encode("latin-1")
    except UnicodeEncodeError:
        return "the reason or a header holds characters outside Latin-1 (HTTP carries bytes: encode them)"
    if any(not name or not set(name) <= HTTP_TOKEN for name, _ in response.headers):
        return f"a header name is not an HTTP token: {[name for name, _ in response.headers]!r}"
    if not isinstance(response.body, bytes) or len(response.body) > MAX_ANSWER_BODY:
        return f"the body is not bytes of at most {MAX_ANSWER_BODY}"
    return ""

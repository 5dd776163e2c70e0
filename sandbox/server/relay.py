"""The loopback relay's in-sandbox end: a port on the container's own 127.0.0.1 whose HTTP requests are
answered on the host (`sandbox/relay.py`, see docs/sandbox.md, "The loopback relay").

Started by the host with its own `docker exec`, as `nobody` (65534), not as the agent:
`python3 -I -S -u /opt/harness/channel relay PORT`. It binds 127.0.0.1:PORT (and [::1]:PORT where the
container has IPv6, so that `localhost` cannot be taken either), writes a `ready` frame to stdout, then
accepts connections, one thread each (at most MAX_CONNECTIONS at once; more wait in the backlog). On
each connection it reads one HTTP/1.x request at a time, bounded (MAX_HEAD bytes of request line and
headers, MAX_BODY of body, by Content-Length or chunked), sends it to the host as a `request` frame
with an id, waits for the `response` frame with that id on stdin and writes it back with a
Content-Length. A request it cannot read is answered here (400, 413, 501) and reported to the host
as a `refused` frame; it never reaches the host's handler. It ends when its stdin ends.

Frames are those of the exec channel (`sandbox/_protocol.py`: a 4-byte big-endian length, JSON; the
body, under `data`, travels raw after the JSON or as base64). Standard library only, Python 3.9+.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import sys
import threading
from typing import IO, Any

from sandbox import _protocol as p

MAX_HEAD = 64 * 1024            # request line, headers (and a chunked body's trailers)
MAX_BODY = 32 * 1024 * 1024     # a request's body, after chunked decoding
MAX_ANSWER = 64 * 1024 * 1024 + MAX_HEAD   # the largest frame the host may send back
MAX_CONNECTIONS = 32            # connections served at once: each is a thread, counted in the pids limit
IDLE_SECONDS = 120.0            # a connection that sends nothing for this long is closed
DRAIN_BYTES = 64 * 1024 * 1024  # what is read and dropped after a refusal, so the client reads the answer
TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"})


class Refused(Exception):
    """A request this end answers itself: `status` and a text body saying what was wrong."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason = status, reason


# ---- reading a request ------------------------------------------------------------------------
class Head:
    """What is left of MAX_HEAD for the lines of one request (its head, then its trailers)."""

    def __init__(self, rfile: IO[bytes]) -> None:
        self.rfile, self.left = rfile, MAX_HEAD

    def raw(self) -> bytes:
        """The next line with its line end; b"" at the end of the stream."""
        line = self.rfile.readline(self.left + 1)
        self.left -= len(line)
        if self.left < 0:
            raise Refused(431, "Request Header Fields Too Large", f"the request line and headers exceed "
                          f"{MAX_HEAD} bytes; send smaller headers")
        if line and not line.endswith(b"\n"):
            raise Refused(400, "Bad Request", "the connection ended inside the request's head")
        return line

    def line(self) -> bytes:
        return self.raw().rstrip(b"\r\n")


def read_request(rfile: IO[bytes], wfile: IO[bytes]) -> tuple[dict[str, Any], bool] | None:
    """The next request of a connection as a frame's fields, and whether the connection may stay open;
    None when the client closed it between requests. Raises Refused, OSError (socket.timeout included)."""
    head = Head(rfile)
    raw = head.raw()
    while raw in (b"\r\n", b"\n"):   # RFC 9112 2.2: empty lines before a request line are ignored
        raw = head.raw()
    if raw == b"":
        return None
    method, target, version = request_line(raw.rstrip(b"\r\n"))
    headers = header_lines(head)
    fields = {k.lower(): v for k, v in reversed(headers)}   # the first of a repeated header wins
    connection = {t.strip().lower() for t in fields.get("connection", "").split(",")}
    keep = ("keep-alive" in connection) if version == "HTTP/1.0" else ("close" not in connection)
    if method == "CONNECT":
        keep = False   # no tunnel is ever opened here: the answer ends the connection
    body = read_body(rfile, wfile, head, headers, fields, version)
    return {"method": method, "target": target, "headers": [list(h) for h in headers], "data": body}, keep


def request_line(line: bytes) -> tuple[str, str, str]:
    parts = line.split(b" ")
    if len(parts) != 3:
        raise Refused(400, "Bad Request", f"the request line {shown(line)} is not METHOD TARGET VERSION; "
                      "expected e.g. 'POST /v1/chat/completions HTTP/1.1'")
    method, target, version = (part.decode("latin-1") for part in parts)
    if not method or not set(method) <= TOKEN:
        raise Refused(400, "Bad Request", f"the method {shown(parts[0])} is not an HTTP token; expected e.g. POST")
    if not target or any(ord(c) <= 32 or ord(c) == 127 for c in target):
        raise Refused(400, "Bad Request", f"the target {shown(parts[1])} is empty or holds controls or "
                      "spaces; expected e.g. /v1/models")
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise Refused(505, "HTTP Version Not Supported", f"the version {shown(parts[2])} is not served; "
                      "expected HTTP/1.1 or HTTP/1.0")
    return method, target, version


def header_lines(head: Head) -> list[tuple[str, str]]:
    headers: list[tuple[str, str]] = []
    while True:
        line = head.line()
        if line == b"":
            return headers
        name, colon, value = line.partition(b":")
        text = name.decode("latin-1")
        if not colon or not text or not set(text) <= TOKEN:
            raise Refused(400, "Bad Request", f"the header line {shown(line)} is not NAME: VALUE (a folded "
                          "line or a space before the colon included); expected e.g. 'Content-Type: text/plain'")
        value = value.strip(b" \t")
        if any(b < 32 and b != 9 or b == 127 for b in value):
            raise Refused(400, "Bad Request", f"the value of header {text!r} holds control characters")
        headers.append((text, value.decode("latin-1")))


def read_body(rfile: IO[bytes], wfile: IO[bytes], head: Head, headers: list[tuple[str, str]],
              fields: dict[str, str], version: str) -> bytes:
    lengths = [v for k, v in headers if k.lower() == "content-length"]
    coding = fields.get("transfer-encoding")
    if coding is not None and lengths:
        raise Refused(400, "Bad Request", "the request has both Transfer-Encoding and Content-Length; send one")
    if coding is not None:
        if coding.strip().lower() != "chunked" or version == "HTTP/1.0":
            raise Refused(501, "Not Implemented", f"the transfer coding {coding!r} is not served; expected "
                          "'Transfer-Encoding: chunked' (HTTP/1.1) or a Content-Length")
        continue_if_asked(wfile, fields)
        return read_chunked(rfile, head)
    if not lengths:
        return b""
    if len(set(lengths)) != 1 or not lengths[0].isdigit() or not lengths[0].isascii():
        raise Refused(400, "Bad Request", f"Content-Length {lengths!r} is not one decimal number; expected e.g. "
                      "'Content-Length: 42'")
    size = int(lengths[0])
    if size > MAX_BODY:
        raise Refused(413, "Payload Too Large", f"the body of {size} bytes exceeds the relay's {MAX_BODY}; "
                      "send a smaller one")
    continue_if_asked(wfile, fields)
    return read_exact(rfile, size)


def continue_if_asked(wfile: IO[bytes], fields: dict[str, str]) -> None:
    """`Expect: 100-continue` (curl's for a large body): the body is welcome, say so before reading it."""
    if fields.get("expect", "").lower() == "100-continue":
        wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        wfile.flush()


def read_exact(rfile: IO[bytes], size: int) -> bytes:
    data = rfile.read(size)
    if len(data) < size:
        raise Refused(400, "Bad Request", f"the connection ended after {len(data)} of the body's {size} bytes")
    return data


def read_chunked(rfile: IO[bytes], head: Head) -> bytes:
    body = bytearray()
    while True:
        line = head.line()
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16) if size_text and len(size_text) <= 16 else -1
        except ValueError:
            size = -1
        if size < 0 or not all(c in b"0123456789abcdefABCDEF" for c in size_text):
            raise Refused(400, "Bad Request", f"the chunk size line {shown(line)} is not a hex number; "
                          "expected e.g. '1a'")
        if size == 0:
            header_lines(head)   # trailers: read (within MAX_HEAD) and dropped
            return bytes(body)
        if len(body) + size > MAX_BODY:
            raise Refused(413, "Payload Too Large", f"the chunked body exceeds the relay's {MAX_BODY} bytes; "
                          "send a smaller one")
        body += read_exact(rfile, size)
        if rfile.read(2) != b"\r\n":
            raise Refused(400, "Bad Request", "a chunk's data is not followed by CRLF")


def shown(raw: bytes) -> str:
    """A piece of the client's bytes for a message: cut, and in ASCII."""
    return ascii(raw[:80].decode("latin-1")) + ("..." if len(raw) > 80 else "")


# ---- writing an answer ------------------------------------------------------------------------
def response_bytes(status: int, reason: str, headers: list[tuple[str, str]], body: bytes, keep: bool,
                   head_only: bool) -> bytes:
    """The response as written to the client: the host's headers but the framing ones, which are ours."""
    lines = [f"HTTP/1.1 {status} {reason}"]
    length = None
    for name, value in headers:
        if name.lower() == "content-length" and head_only:
            length = value
        elif name.lower() not in HOP_BY_HOP:
            lines.append(f"{name}: {value}")
    if status >= 200 and status not in (204, 304):
        lines.append(f"Content-Length: {length if length is not None else len(body)}")
    lines.append("Connection: keep-alive" if keep else "Connection: close")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return raw if head_only or status < 200 or status in (204, 304) else raw + body


def refusal_bytes(refused: Refused) -> bytes:
    text = f"{refused} (answered by the sandbox's loopback relay; the request did not reach the host)\n"
    return response_bytes(refused.status, refused.reason, [("Content-Type", "text/plain; charset=utf-8")],
                          text.encode("utf-8"), False, False)


def answer_fields(frame: dict[str, Any]) -> tuple[int, str, list[tuple[str, str]], bytes]:
    """The host's answer, checked again here: a status line or header that could split the response
    becomes a 502 rather than reaching the client."""
    status, reason, body = frame.get("status"), frame.get("reason"), frame.get("data")
    headers = [tuple(h) for h in frame.get("headers") or () if isinstance(h, list) and len(h) == 2
               and all(isinstance(x, str) for x in h)]
    pairs: list[tuple[str, str]] = [(str(k), str(v)) for k, v in headers]
    text = "".join(k + v for k, v in pairs) + (reason if isinstance(reason, str) else "")
    if (not isinstance(status, int) or not 200 <= status <= 599 or not isinstance(reason, str)
            or not isinstance(body, bytes) or len(pairs) != len(frame.get("headers") or ())
            or any(c in text for c in "\r\n\0") or any(not k or not set(k) <= TOKEN for k, _ in pairs)):
        return 502, "Bad Gateway", [("Content-Type", "text/plain")], b"the host's answer was malformed\n"
    return status, reason, pairs, body


# ---- the relay --------------------------------------------------------------------------------
class Relay:
    """The listening sockets, the connections' threads and the requests waiting for the host."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.write_lock = threading.Lock()
        self.ids = itertools.count(1)
        self.waiting: dict[int, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self.waiting_lock = threading.Lock()
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.closing = False

    def send(self, frame: dict[str, Any]) -> None:
        data = p.encode_frame(frame)
        with self.write_lock:
            self.out.write(data)
            self.out.flush()

    def ask(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Send one request to the host and wait for its answer (or for the relay's end)."""
        rid = next(self.ids)
        event, box = threading.Event(), list[dict[str, Any]]()
        with self.waiting_lock:
            if self.closing:
                raise Refused(503, "Service Unavailable", "the loopback relay is closing")
            self.waiting[rid] = (event, box)
        try:
            self.send({"kind": "request", "id": rid, **fields})
            event.wait()
        finally:
            with self.waiting_lock:
                self.waiting.pop(rid, None)
        if not box:
            raise Refused(503, "Service Unavailable", "the loopback relay closed before the host answered")
        return box[0]

    def answered(self, frame: dict[str, Any]) -> None:
        rid = frame.get("id")
        with self.waiting_lock:
            slot = self.waiting.get(rid) if isinstance(rid, int) else None
        if slot is not None:
            slot[1].append(frame)
            slot[0].set()

    def close(self) -> None:
        with self.waiting_lock:
            self.closing = True
            for event, _ in self.waiting.values():
                event.set()

    def accept_loop(self, listener: socket.socket) -> None:
        while True:
            self.slots.acquire()
            try:
                conn, _ = listener.accept()
            except OSError:
                self.slots.release()
                return
            try:
                threading.Thread(target=self.serve, args=(conn,), daemon=True).start()
            except RuntimeError:   # no thread to be had (the container's pids limit): this one waits no more
                conn.close()
                self.slots.release()

    def serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(IDLE_SECONDS)
            rfile, wfile = conn.makefile("rb"), conn.makefile("wb")
            self.exchange(conn, rfile, wfile)
        except OSError:
            pass   # the client went away (or sent nothing for IDLE_SECONDS): its connection ends
        finally:
            conn.close()
            self.slots.release()

    def exchange(self, conn: socket.socket, rfile: IO[bytes], wfile: IO[bytes]) -> None:
        """The requests of one connection, one at a time, until it closes or says Connection: close."""
        while True:
            try:
                read = read_request(rfile, wfile)
                if read is None:
                    return
                fields, keep = read
                status, reason, headers, body = answer_fields(self.ask(fields))
            except Refused as refused:
                wfile.write(refusal_bytes(refused))
                wfile.flush()
                self.send({"kind": "refused", "status": refused.status, "reason": str(refused)[:500]})
                drain(conn)
                return
            wfile.write(response_bytes(status, reason, headers, body, keep, fields["method"] == "HEAD"))
            wfile.flush()
            if not keep:
                return


def drain(conn: socket.socket) -> None:
    """After a refusal: stop writing, and read what the client still sends (bounded) before closing, so
    that it reads the answer instead of a reset (a close with unread data sends RST)."""
    try:
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(5)
        left = DRAIN_BYTES
        while left > 0:
            chunk = conn.recv(min(left, 1 << 16))
            if not chunk:
                return
            left -= len(chunk)
    except OSError:
        return


def listen(port: int) -> list[socket.socket]:
    """127.0.0.1:port, and [::1]:port where the container has IPv6. Raises OSError (the port is taken)."""
    sockets: list[socket.socket] = []
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # not SO_REUSEPORT: no one shares it
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((host, port))
            sock.listen(128)
        except OSError:
            sock.close()
            if family == socket.AF_INET6 and sockets:
                continue   # no IPv6 loopback here: nothing to hold
            for held in sockets:
                held.close()
            raise
        sockets.append(sock)
    return sockets


def main(argv: list[str], guarded: bool) -> int:
    """`relay PORT`: serve until stdin ends. Exit status 0 at the end of stdin, 2 for a bad argument,
    1 when the port cannot be bound (said in the `ready` frame, `ready` false)."""
    # SIGPIPE stays ignored (Python's default): a client that hangs up early is an EPIPE on its own socket,
    # which ends its connection only
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    if len(argv) != 1 or not argv[0].isdigit() or not 1 <= int(argv[0]) <= 65535:
        p.write_frame(stdout, {"kind": "ready", "ready": False, "error": f"relay: the arguments {argv!r} are not "
                               "one port number 1-65535; expected e.g. `relay 8000`"})
        return 2
    port = int(argv[0])
    try:
        sockets = listen(port)
    except OSError as exc:
        p.write_frame(stdout, {"kind": "ready", "ready": False, "error": f"relay: cannot listen on 127.0.0.1:{port}: "
                               f"{exc.strerror or exc} (errno {exc.errno}); pick a free port"})
        return 1
    relay = Relay(stdout)
    for sock in sockets:
        threading.Thread(target=relay.accept_loop, args=(sock,), daemon=True).start()
    relay.send({"kind": "ready", "ready": True, "pid": os.getpid(), "guarded": guarded, "port": port,
                "ipv6": len(sockets) > 1})
    try:
        while True:
            header = stdin.read(p.HEADER.size)
            if len(header) < p.HEADER.size:
                return 0
            size = p.frame_size(header)
            if size > MAX_ANSWER:
                raise p.FrameError(f"a frame of {size} bytes from the host exceeds {MAX_ANSWER}")
            body = stdin.read(size)
            if len(body) < size:
                return 0
            relay.answered(p.decode_body(body))
    except (p.FrameError, ValueError) as exc:
        sys.stderr.write(f"relay: a frame from the host could not be read ({exc}); the relay ends\n")
        return 1
    finally:
        relay.close()
        for sock in sockets:
            sock.close()

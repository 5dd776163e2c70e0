"""The loopback relay's in-sandbox end: a port on the container's own 127.0.0.1 whose HTTP requests are
answered on the host (`sandbox/relay.py`, see docs/sandbox.md, "The loopback relay").

Started by the host with its own `docker exec`, as `nobody` (65534), not as the agent:
`python3 -I -S -u /opt/harness/channel relay PORT`. It binds 127.0.0.1:PORT (and [::1]:PORT where the
container has IPv6, so that `localhost` cannot be taken either), writes a `ready` frame to stdout, then
accepts connections, one thread each (at most MAX_CONNECTIONS at once; more wait in the backlog). On
each connection it reads one HTTP/1.x request at a time, bounded (MAX_HEAD bytes of request line and
headers, MAX_BODY of body, by Content-Length or chunked), sends it to the host as a `request` frame
with an id, waits for the `response` frame with that id on stdin and writes it back with a
Content-Length. A request it cannot read is answered here (400, 413, 431, 501, 505) and reported to the host
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
from sandbox.server.http_wire import MAX_HEAD, Refused, answer_fields, read_request, refusal_bytes, response_bytes

MAX_ANSWER = 64 * 1024 * 1024 + MAX_HEAD   # the largest frame the host may send back
MAX_CONNECTIONS = 32            # connections served at once: each is a thread, counted in the pids limit
IDLE_SECONDS = 120.0            # a connection that sends nothing for this long is closed
DRAIN_BYTES = 64 * 1024 * 1024  # what is read and dropped after a refusal, so the client reads the answer


class Relay:
    """The listening sockets, the connections' threads and the requests waiting for the host."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.write_lock = threading.Lock()
        self.ids = itertools.count(1)
        self.waiting: dict[int, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self.waiting_lock = threading.Lock()
        self.done = threading.Condition()   # `answering`: requests read and not yet answered
        self.answering = 0
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
            except Refused as refused:   # answered here, and told to the host
                wfile.write(refusal_bytes(refused))
                wfile.flush()
                self.send({"kind": "refused", "status": refused.status, "reason": str(refused)[:500]})
                drain(conn)
                return
            if read is None:
                return
            with self.done:
                self.answering += 1
            try:
                if not self.answer(wfile, *read):
                    return
            finally:
                with self.done:
                    self.answering -= 1
                    self.done.notify_all()

    def answer(self, wfile: IO[bytes], fields: dict[str, Any], keep: bool) -> bool:
        """Ask the host and write its answer (a 503 if the relay ends first); whether the connection stays open."""
        try:
            status, reason, headers, body = answer_fields(self.ask(fields))
        except Refused as refused:
            wfile.write(refusal_bytes(refused))
            wfile.flush()
            return False
        wfile.write(response_bytes(status, reason, headers, body, keep, fields["method"] == "HEAD"))
        wfile.flush()
        return keep

    def wait_answered(self, timeout: float) -> None:
        """Until every request read has been answered (the 503s of `close` included), `timeout` at most."""
        with self.done:
            self.done.wait_for(lambda: self.answering == 0, timeout)


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
        for sock in sockets:   # shutdown wakes the thread blocked in accept(); close alone may not
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        relay.close()
        relay.wait_answered(2.0)   # the clients still waiting read a 503 rather than a closed connection

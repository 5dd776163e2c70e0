"""The server's request loop: read a request frame, run its operation, write the answer frame, then
start the bash for the next command. One request at a time.

Frames come over the exec's stdin and stdout until the host asks, over them, to attach to a unix
socket it listens on (`AttachRequest`): then over that socket, which skips the Docker daemon's copy of
every byte. The request can only come over stdin, which no other process of the container can write
to (this process is undumpable, see `sandbox.server.guard`)."""

from __future__ import annotations

import signal
import sys
from typing import IO, TYPE_CHECKING, Any

from sandbox import _protocol as p
from sandbox.server import files
from sandbox.server.guard import make_undumpable
from sandbox.server.loop import run_exec_request
from sandbox.server.processes import Sweep, WaitingShell

if TYPE_CHECKING:
    import socket


class Server:
    def __init__(self) -> None:
        self.sweep = Sweep()
        self.shell = WaitingShell(self.sweep)
        self.commands = 0

    def handle(self, frame: dict[str, Any]) -> dict[str, Any]:
        """The answer frame to a request frame; an operation that raised is reported, never fatal."""
        try:
            req = p.request_from_dict(frame)
            if isinstance(req, p.ExecRequest):
                self.commands += 1
                answer: p.Answer = run_exec_request(req, self.commands, self.sweep, self.shell)
            elif isinstance(req, p.ReadRequest):
                answer = files.read_file(req)
            elif isinstance(req, p.WriteRequest):
                answer = files.write_file(req)
            elif isinstance(req, p.PutTarRequest):
                answer = files.put_tar(req)
            elif isinstance(req, p.GetTarRequest):
                answer = files.get_tar(req)
            else:
                raise ValueError("attach is asked over the exec's stdin only, once")
        except OSError as exc:
            return p.error_to_dict(p.RemoteError(type=type(exc).__name__, message=exc.strerror or str(exc),
                                                 errno=exc.errno, filename=exc.filename))
        except Exception as exc:  # noqa: BLE001 - reported to the host, the channel lives on
            return p.error_to_dict(p.RemoteError(type=type(exc).__name__, message=str(exc)))
        return p.answer_to_dict(answer)


def attach(req: p.AttachRequest) -> tuple[socket.socket | None, p.AttachAnswer]:
    """Connect to the host's socket and identify this end with the token; the socket, or None and why not."""
    import socket  # noqa: PLC0415 - only a server that attaches pays for it
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)   # not inherited by commands (PEP 446)
    sock.settimeout(5)
    try:
        sock.connect(req.path)
        sock.sendall(p.encode_frame({"token": req.token}))
    except OSError as exc:
        sock.close()
        return None, p.AttachAnswer(attached=False, reason=f"{type(exc).__name__}: {exc}")
    sock.settimeout(None)
    return sock, p.AttachAnswer(attached=True)


def main(guarded: bool | None = None) -> int:
    """Serve until the host closes the channel; `guarded`: whether `guard.make_undumpable` succeeded
    already (`__main__` calls it first of all), None: call it now."""
    if guarded is None:
        guarded = make_undumpable()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    server = Server()
    server.sweep.kill_leftovers()   # none: the host ended every process of the agent before this start
    p.write_frame(stdout, p.answer_to_dict(p.Hello(ready=True, pid=server.sweep.me, guarded=guarded)))
    reader: IO[bytes] = stdin
    writer: IO[bytes] = stdout
    link: socket.socket | None = None
    unused_socket = False   # attached, and nothing came over the socket yet
    while True:
        try:
            frame = p.read_frame(reader)
        except ConnectionError:   # the host closed its listener with our connection unaccepted
            frame = None
        if frame is None:
            if not unused_socket:
                return 0
            for closing in (reader, writer, link):   # the host kept to stdin and stdout
                if closing is not None:
                    closing.close()
            reader, writer, link, unused_socket = stdin, stdout, None, False
            continue
        if frame.get("op") == p.Op.ATTACH.value and reader is stdin:
            try:
                req = p.request_from_dict(frame)
                assert isinstance(req, p.AttachRequest)
                link, answer = attach(req)
            except (p.FrameError, TypeError) as exc:
                link, answer = None, p.AttachAnswer(attached=False, reason=str(exc))
            p.write_frame(stdout, p.answer_to_dict(answer))
            if link is not None:
                reader, writer, unused_socket = link.makefile("rb"), link.makefile("wb"), True
            continue
        unused_socket = False
        p.write_frame(writer, server.handle(frame))
        server.shell.start()

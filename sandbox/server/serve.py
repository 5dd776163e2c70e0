"""The server's request loop: read a request frame, run its operation, write the answer frame, then
start the bash for the next command. One request at a time."""

from __future__ import annotations

import signal
import sys
from typing import Any

from sandbox import _protocol as p
from sandbox.server import files
from sandbox.server.loop import run_command
from sandbox.server.processes import Sweep, WaitingShell


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
                answer: p.Answer = run_command(req, self.commands, self.sweep, self.shell)
            elif isinstance(req, p.ReadRequest):
                answer = files.read_file(req)
            elif isinstance(req, p.WriteRequest):
                answer = files.write_file(req)
            elif isinstance(req, p.PutTarRequest):
                answer = files.put_tar(req)
            else:
                answer = files.get_tar(req)
        except OSError as exc:
            return p.error_to_dict(p.RemoteError(type=type(exc).__name__, message=exc.strerror or str(exc),
                                                 errno=exc.errno, filename=exc.filename))
        except Exception as exc:  # noqa: BLE001 - reported to the host, the channel lives on
            return p.error_to_dict(p.RemoteError(type=type(exc).__name__, message=str(exc)))
        return p.answer_to_dict(answer)


def make_undumpable() -> bool:
    """PR_SET_DUMPABLE 0: the agent (same user) can no longer open this process's /proc files.

    Without it a command could write forged answers into /proc/<this pid>/fd/1 (the host would take
    them for the channel's) or rewrite this process through /proc/<pid>/mem. Commands are not
    affected: exec() makes each of them dumpable again.
    """
    try:
        import ctypes  # noqa: PLC0415 - only here: the server's one use of it
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(4, 0, 0, 0, 0) == 0)   # PR_SET_DUMPABLE, SUID_DUMP_DISABLE
    except (OSError, AttributeError, ImportError):
        return False


def main() -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    guarded = make_undumpable()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    server = Server()
    server.sweep.kill_leftovers()   # orphans of a channel that died
    p.write_frame(stdout, p.answer_to_dict(p.Hello(ready=True, pid=server.sweep.me, guarded=guarded)))
    while True:
        frame = p.read_frame(stdin)
        if frame is None:
            return 0
        p.write_frame(stdout, server.handle(frame))
        server.shell.start()

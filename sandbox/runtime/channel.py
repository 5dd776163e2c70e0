"""What runs inside a sandbox, over its exec channel: commands, file reads and writes, tar in and out.

The runtime knows nothing of how the container was made (`sandbox/deployment/`); it is given a way
to open a channel and the environment every command starts from. It speaks the channel's typed
protocol (`sandbox/_protocol.py`): requests and answers are its NamedTuples, turned here into the
results of `sandbox.api`, and the server's errors into the exceptions the `Sandbox` protocol promises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn, TypeVar

from sandbox import _protocol as protocol
from sandbox.api import OUTPUT_DIR, WORKDIR, ExecResult, FileData, StreamCapture, WriteOutcome
from sandbox.errors import ChannelClosed, ChannelError, CopyError, SandboxError
from sandbox.host_channel import Channel
from sandbox.text import escape_output

A = TypeVar("A")


class ChannelRuntime:
    """Commands and files of one running sandbox, through one exec channel at a time."""

    def __init__(self, connect: Callable[[], Channel], env: dict[str, str],
                 clear: Callable[[], object] | None = None) -> None:
        """Open the first channel with `connect`; `env` is the environment every command starts from;
        `clear` runs before every later channel starts, and must end every process of the agent's user and
        prove it, or raise (`sandbox.agent_sweep.end_agent_processes`; None: nothing to clear, as in a
        runtime whose processes end with their channel).

        Raises:
            ChannelError: the channel server did not start.
        """
        self._connect = connect
        self.clear = clear
        self.env = dict(env)
        self.refused = ""   # why no new channel was started, once clearing failed: the runtime is done
        self.channel: Channel | None = connect()

    def restart(self) -> None:
        """Open a new channel once `clear` has ended every process of the agent, the old server (dead,
        stopped or hung) included: no process of the old channel's era sees the new server start.

        Raises:
            SandboxError: clearing failed (some process survived); no channel is started, now or later.
            ChannelError: the new server did not start.
        """
        if self.refused:
            raise SandboxError(self.refused)
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.clear is not None:
            try:
                self.clear()
            except SandboxError as exc:
                self.refused = f"the exec channel was not restarted: {exc}"
                raise SandboxError(self.refused) from exc
        self.channel = self._connect()

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None

    def exec(self, command: str, timeout: float = 60.0, *, cwd: str = WORKDIR,
             env: dict[str, str] | None = None, error_pattern: str | None = None,
             save_output: bool = True, head_bytes: int = 32768, tail_bytes: int = 32768,
             save_over: tuple[int, int] = (0, 0)) -> ExecResult:
        """See `Sandbox.exec`.

        Raises:
            ChannelClosed: the channel died or stopped answering.
            SandboxError: bash could not be started.
        """
        request = protocol.ExecRequest(command=command, timeout=timeout, cwd=cwd, env={**self.env, **(env or {})},
                                       error_pattern=error_pattern, save=save_output, output_dir=OUTPUT_DIR,
                                       head_bytes=head_bytes, tail_bytes=tail_bytes,
                                       save_over_bytes=save_over[0], save_over_lines=save_over[1])
        answer = self._call(request, "", timeout=timeout + 30)
        if isinstance(answer, protocol.SpawnFailed):
            raise SandboxError(f"could not start bash in the sandbox: {answer.spawn_error}")
        a = _expect(answer, protocol.ExecAnswer)
        return ExecResult(command=command, exit_code=a.exit_code, duration=a.duration, timed_out=a.timed_out,
                          stdout=_capture(a.stdout), stderr=_capture(a.stderr), killed_leftovers=a.killed_leftovers)

    def read_file(self, path: str, max_bytes: int | None = None) -> FileData:
        """See `Sandbox.read_file`."""
        a = _expect(self._call(protocol.ReadRequest(path=path, max_bytes=max_bytes), path), protocol.ReadAnswer)
        return FileData(path=path, realpath=a.realpath, data=a.data, sha256=a.sha256, size=a.size)

    def write_file(self, path: str, data: bytes, *, expect_sha256: str | None = None,
                   mode: int | None = None) -> WriteOutcome:
        """See `Sandbox.write_file`."""
        request = protocol.WriteRequest(path=path, data=data, expect_sha256=expect_sha256, mode=mode)
        a = _expect(self._call(request, path), protocol.WriteAnswer)
        return WriteOutcome(written=a.written, sha256=a.sha256, conflict=a.conflict)

    def put_tar(self, data: bytes, dest: str = WORKDIR) -> None:
        """Unpack a tar archive (regular files, directories, symlinks only) into `dest`.

        Raises:
            SandboxError: the server refused a member (absolute, `..`, another kind).
            ChannelClosed: the channel died.
        """
        _expect(self._call(protocol.PutTarRequest(data=data, dest=dest), dest, timeout=300), protocol.PutTarAnswer)

    def get_tar(self, src: str, max_bytes: int, max_files: int, exclude: list[str]) -> bytes:
        """The tree at `src` as an unchecked tar archive (the caller checks its members).

        Raises:
            CopyError: the tree holds more than `max_files` entries or `max_bytes` bytes.
            ChannelClosed: the channel died.
        """
        request = protocol.GetTarRequest(src=src, max_bytes=max_bytes, max_files=max_files, exclude=tuple(exclude))
        a = _expect(self._call(request, src, timeout=300), protocol.GetTarAnswer)
        if a.too_large:
            raise CopyError(f"{src} in the sandbox holds more than the copy limit ({max_files} files or "
                            f"{max_bytes} bytes); nothing was copied")
        return a.data

    def _call(self, request: protocol.Request, where: str,
              timeout: float | None = 60.0) -> protocol.Answer:
        if self.refused:
            raise SandboxError(self.refused)
        if self.channel is None:
            raise ChannelClosed("the exec channel is not running; call restart_channel()")
        answer = self.channel.call(request, timeout)
        if isinstance(answer, protocol.RemoteError):
            raise_remote(answer, protocol.OPS[type(request)].value, where)
        return answer


def _expect(answer: protocol.Answer, cls: type[A]) -> A:
    if not isinstance(answer, cls):
        raise ChannelError(f"the channel server answered with a {type(answer).__name__} where a "
                           f"{cls.__name__} was expected; restart the channel")
    return answer


def _capture(s: protocol.StreamAnswer) -> StreamCapture:
    return StreamCapture(head=escape_output(s.head), tail=escape_output(s.tail), total_bytes=s.total_bytes,
                         total_lines=s.total_lines, truncated=s.truncated,
                         error_lines=tuple((e.line, escape_output(e.text)) for e in s.error_lines),
                         error_lines_total=s.error_lines_total, saved_path=s.saved_path, saved_bytes=s.saved_bytes,
                         scanned_bytes=s.scanned_bytes)


def raise_remote(err: protocol.RemoteError, op: str, where: str) -> NoReturn:
    """Raise the server's error: a file error as its built-in type (`protocol.OS_ERRORS`), anything
    else as SandboxError."""
    builtin = protocol.OS_ERRORS.get(err.type)
    if builtin is not None:
        raise builtin(err.errno or 0, err.message, err.filename or where)
    raise SandboxError(f"{op} {where!r} failed in the sandbox: {err.type}: {err.message}")

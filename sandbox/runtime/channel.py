"""What runs inside a sandbox, over its exec channel: commands, file reads and writes, tar in and out.

The runtime knows nothing of how the container was made (`sandbox/deployment/`); it is given a way
to open a channel and the environment every command starts from. Requests are the channel's current
dict payloads; answers are turned into the typed results of `sandbox.api`, and the server's errors
into the exceptions the `Sandbox` protocol promises.
"""

from __future__ import annotations

import base64
from typing import Any, Callable, NoReturn

from sandbox.api import OUTPUT_DIR, WORKDIR, ExecResult, FileData, StreamCapture, WriteOutcome
from sandbox.channel import Channel
from sandbox.errors import ChannelClosed, CopyError, SandboxError
from sandbox.text import safe_text


class ChannelRuntime:
    """Commands and files of one running sandbox, through one exec channel at a time."""

    def __init__(self, connect: Callable[[], Channel], env: dict[str, str]) -> None:
        """Open the first channel with `connect`; `env` is the environment every command starts from.

        Raises:
            ChannelError: the channel server did not start.
        """
        self._connect = connect
        self.env = dict(env)
        self.channel: Channel | None = connect()

    def restart(self) -> None:
        """Open a new channel; the old server, if it still exists (stopped, hung), is killed."""
        old_pid = None
        if self.channel is not None:
            old_pid = self.channel.server_pid
            self.channel.close()
            self.channel = None
        self.channel = self._connect()
        if old_pid is not None:
            self.channel.request({"op": "exec", "command": f"kill -KILL {old_pid} 2>/dev/null", "timeout": 10,
                                  "env": self.env})

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
        answer = self._request({"op": "exec", "command": command, "timeout": timeout, "cwd": cwd,
                                "env": {**self.env, **(env or {})}, "error_pattern": error_pattern,
                                "save": save_output, "output_dir": OUTPUT_DIR, "head_bytes": head_bytes,
                                "tail_bytes": tail_bytes, "save_over_bytes": save_over[0],
                                "save_over_lines": save_over[1]}, timeout=timeout + 30)
        if "spawn_error" in answer:
            raise SandboxError(f"could not start bash in the sandbox: {answer['spawn_error']}")
        return ExecResult(command=command, exit_code=int(answer["exit_code"]), duration=float(answer["duration"]),
                          timed_out=bool(answer["timed_out"]), stdout=_capture(answer["stdout"]),
                          stderr=_capture(answer["stderr"]), killed_leftovers=int(answer["killed_leftovers"]))

    def read_file(self, path: str, max_bytes: int | None = None) -> FileData:
        """See `Sandbox.read_file`."""
        a = self._request({"op": "read", "path": path, "max_bytes": max_bytes})
        return FileData(path=path, realpath=a["realpath"], data=base64.b64decode(a["data"]), sha256=a["sha256"],
                        size=int(a["size"]))

    def write_file(self, path: str, data: bytes, *, expect_sha256: str | None = None,
                   mode: int | None = None) -> WriteOutcome:
        """See `Sandbox.write_file`."""
        a = self._request({"op": "write", "path": path, "data": base64.b64encode(data).decode(),
                           "expect_sha256": expect_sha256, "mode": mode})
        return WriteOutcome(written=bool(a["written"]), sha256=a["sha256"], conflict=bool(a["conflict"]))

    def put_tar(self, data: bytes, dest: str = WORKDIR) -> None:
        """Unpack a tar archive (regular files, directories, symlinks only) into `dest`.

        Raises:
            SandboxError: the server refused a member (absolute, `..`, another kind).
            ChannelClosed: the channel died.
        """
        self._request({"op": "put_tar", "dest": dest, "data": base64.b64encode(data).decode()}, timeout=300)

    def get_tar(self, src: str, max_bytes: int, max_files: int, exclude: list[str]) -> bytes:
        """The tree at `src` as an unchecked tar archive (the caller checks its members).

        Raises:
            CopyError: the tree holds more than `max_files` entries or `max_bytes` bytes.
            ChannelClosed: the channel died.
        """
        a = self._request({"op": "get_tar", "src": src, "max_bytes": max_bytes, "max_files": max_files,
                           "exclude": exclude}, timeout=300)
        if a.get("too_large"):
            raise CopyError(f"{src} in the sandbox holds more than the copy limit ({max_files} files or "
                            f"{max_bytes} bytes); nothing was copied")
        return base64.b64decode(a["data"])

    def _request(self, payload: dict[str, Any], timeout: float | None = 60.0) -> dict[str, Any]:
        if self.channel is None:
            raise ChannelClosed("the exec channel is not running; call restart_channel()")
        answer = self.channel.request(payload, timeout)
        if not answer.get("ok"):
            raise_remote(answer.get("error") or {}, payload)
        return answer


def _capture(d: dict[str, Any]) -> StreamCapture:
    lines = tuple((int(n), safe_text(base64.b64decode(t))) for n, t in d["error_lines"])
    return StreamCapture(head=safe_text(base64.b64decode(d["head"])), tail=safe_text(base64.b64decode(d["tail"])),
                         total_bytes=int(d["total_bytes"]), total_lines=int(d["total_lines"]),
                         truncated=bool(d["truncated"]), error_lines=lines,
                         error_lines_total=int(d["error_lines_total"]), saved_path=d.get("saved_path"),
                         saved_bytes=int(d.get("saved_bytes", 0)))


BUILTIN_ERRORS: dict[str, type[OSError]] = {
    "FileNotFoundError": FileNotFoundError, "IsADirectoryError": IsADirectoryError,
    "NotADirectoryError": NotADirectoryError, "PermissionError": PermissionError,
    "FileExistsError": FileExistsError}
"""The server's OSErrors raised again on the host as the same built-in type (others: SandboxError)."""


def raise_remote(err: dict[str, Any], payload: dict[str, Any]) -> NoReturn:
    """Raise the server's error: a file error as its built-in type, anything else as SandboxError."""
    kind, message = err.get("type", "Error"), err.get("message", "unknown error")
    where = payload.get("path") or payload.get("src") or payload.get("dest") or ""
    builtin = BUILTIN_ERRORS.get(kind)
    if builtin is not None:
        raise builtin(err.get("errno") or 0, message, err.get("filename") or where)
    raise SandboxError(f"{payload.get('op')} {where!r} failed in the sandbox: {kind}: {message}")

"""A directory-backed stand-in for a sandbox, for TESTS ONLY: no isolation of any kind.

`LocalRuntime` satisfies the `Sandbox` protocol so that the tools' own logic (view, edit, write,
apply_patch, compare-and-swap, idempotency keys, the lint gate, search) is tested in milliseconds
without Docker. It is never used by sessions: nothing in `harness/` imports it, and
`sandbox.runtime` does not export it. Commands run on the host, as the test's user, with the host's
network and programs (`python3` is the test's own interpreter, first on PATH); only code under test
should ever run through it.

Paths: the sandbox's folders `WORKDIR` and `/tmp/harness` (saved outputs and state) live under a
root folder, so `/workspace/a.py` is `<root>/workspace/a.py`. Commands see the same places: in a
command's text and `cwd` those prefixes are rewritten to the root, and in its output the root is
rewritten back, so `realpath -m /workspace/x` answers `/workspace/x` as inside a container. Any
other path (`/etc`) is the host's own.

What matches the exec channel exactly: calls are served one at a time (threads wait their turn);
`read_file` and `write_file` (the same compare-and-swap code, the same error types, through the same
`raise_remote`); `ExecResult`'s shape, head and tail kept, error lines, outputs saved under
OUTPUT_DIR when cut. What does not: no resource limits, no leftover
sweep beyond killing the command's process group (`killed_leftovers` is always 0; a process left
holding the command's output keeps it waiting until the timeout), a timeout kills at once (no
SIGTERM grace), `restart_channel` does nothing, and file permissions mean nothing to root.
"""

from __future__ import annotations

import functools
import hashlib
import os
import posixpath
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, NoReturn, ParamSpec, TypeVar

from sandbox import transfer
from sandbox._protocol import RemoteError
from sandbox.api import OUTPUT_DIR, STATE_DIR, WORKDIR, ExecResult, FileData, StreamCapture, WriteOutcome
from sandbox.errors import SandboxError
from sandbox.runtime.channel import raise_remote
from sandbox.text import escape_output

HARNESS_TMP = posixpath.dirname(OUTPUT_DIR)   # /tmp/harness: saved outputs and per-session state
MAPPED = (WORKDIR, HARNESS_TMP)
_PREFIX = re.compile(r"(?<![\w./-])(" + "|".join(re.escape(p) for p in MAPPED) + r")(?=[/\s'\"`;:|&)]|$)")
ERROR_LINES_KEPT, ERROR_LINE_BYTES, SAVE_BYTES = 50, 400, 8 << 20   # as the channel server's defaults


P = ParamSpec("P")
R = TypeVar("R")


def _one_at_a_time(method: Callable[Concatenate[LocalRuntime, P], R]) -> Callable[Concatenate[LocalRuntime, P], R]:
    """Serve calls one at a time, as the exec channel does (threads of one session wait their turn)."""
    @functools.wraps(method)
    def serve(self: LocalRuntime, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._busy:
            return method(self, *args, **kwargs)
    return serve


class LocalRuntime:
    """A project folder on the host posing as a sandbox (tests only; see the module docstring)."""

    def __init__(self, root: Path | None = None, *, session: str = "local", project_dir: Path | None = None,
                 max_copy_bytes: int = 512 * 1024 * 1024, max_copy_files: int = 100_000) -> None:
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="harness-local-")) if root is None else Path(root)
        self.session = session
        self.max_copy_bytes, self.max_copy_files = max_copy_bytes, max_copy_files
        self._counter = 0
        self._busy = threading.Lock()   # one request at a time, as the exec channel serves them
        for folder in (WORKDIR, OUTPUT_DIR, STATE_DIR, "/home/agent"):
            self.host(folder).mkdir(parents=True, exist_ok=True)
        if project_dir is not None:
            self.copy_in(Path(project_dir))

    def __enter__(self) -> LocalRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- paths -------------------------------------------------------------------------------
    def host(self, path: str) -> Path:
        """Where the sandbox path `path` (relative: under WORKDIR) lives on the host."""
        absolute = posixpath.normpath(posixpath.join(WORKDIR, path))
        if any(absolute == p or absolute.startswith(p + "/") for p in MAPPED):
            return Path(str(self.root) + absolute)
        return Path(absolute)

    def inside(self, host_path: str) -> str:
        """The sandbox path of a host path (the inverse of `host`)."""
        root = str(self.root)
        return host_path[len(root):] if host_path == root or host_path.startswith(root + "/") else host_path

    def _to_host_text(self, text: str) -> str:
        return _PREFIX.sub(lambda m: str(self.root) + m.group(1), text)

    def _from_host_bytes(self, data: bytes) -> bytes:
        return data.replace(str(self.root).encode(), b"")

    # ---- the Sandbox protocol ----------------------------------------------------------------
    @_one_at_a_time
    def exec(self, command: str, timeout: float = 60.0, *, cwd: str = WORKDIR,
             env: dict[str, str] | None = None, error_pattern: str | None = None,
             save_output: bool = True, head_bytes: int = 32768, tail_bytes: int = 32768,
             save_over: tuple[int, int] = (0, 0)) -> ExecResult:
        """See `Sandbox.exec`: `bash -c` in its own process group, on the host (see the module docstring)."""
        self._counter += 1
        number = self._counter
        path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "/usr/bin:/bin")])
        base = {"PATH": path, "HOME": str(self.host("/home/agent")),
                "LANG": "C.UTF-8", "TERM": "dumb", "PYTHONDONTWRITEBYTECODE": "1"}
        started = time.monotonic()
        try:
            proc = subprocess.Popen(["/bin/bash", "-c", self._to_host_text(command)], cwd=self.host(cwd),
                                    env={**base, **(env or {})}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise SandboxError(f"could not start bash in the sandbox: {type(exc).__name__}: {exc}") from exc
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            out, err = proc.communicate()
        _kill_group(proc.pid)   # what it left running in its group dies with it
        duration = time.monotonic() - started
        code = proc.returncode
        caps = [self._capture(self._from_host_bytes(data), f"{OUTPUT_DIR}/cmd-{number}.{name}.txt", save_output,
                              head_bytes, tail_bytes, error_pattern, save_over)
                for name, data in (("stdout", out), ("stderr", err))]
        return ExecResult(command=command, exit_code=128 - code if code < 0 else code, duration=duration,
                          timed_out=timed_out, stdout=caps[0], stderr=caps[1])

    @_one_at_a_time
    def read_file(self, path: str, max_bytes: int | None = None) -> FileData:
        """See `Sandbox.read_file`; the same errors as through the channel."""
        where = self.host(path)
        try:
            with open(where, "rb") as f:
                data = f.read()
        except OSError as exc:
            self._raise(exc, "read", path)
        kept = data if max_bytes is None else data[:max_bytes]
        return FileData(path=path, realpath=self.inside(os.path.realpath(where)), data=kept,
                        sha256=hashlib.sha256(data).hexdigest(), size=len(data))

    @_one_at_a_time
    def write_file(self, path: str, data: bytes, *, expect_sha256: str | None = None,
                   mode: int | None = None) -> WriteOutcome:
        """See `Sandbox.write_file`: the channel server's compare-and-swap, step for step."""
        where = str(self.host(path))
        try:
            try:
                with open(where, "rb") as f:
                    current = hashlib.sha256(f.read()).hexdigest()
                kept_mode = os.stat(where).st_mode & 0o7777
            except FileNotFoundError:
                current, kept_mode = "", 0o644
            if expect_sha256 is not None and expect_sha256 != current:
                return WriteOutcome(written=False, sha256=current, conflict=True)
            parent = os.path.dirname(where) or "."
            os.makedirs(parent, exist_ok=True)
            tmp = os.path.join(parent, f".{os.path.basename(where)}.harness-tmp-{os.getpid()}")
            with open(tmp, "wb") as f:
                f.write(data)
            os.chmod(tmp, kept_mode if mode is None else mode)
            os.replace(tmp, where)
        except OSError as exc:
            self._raise(exc, "write", path)
        return WriteOutcome(written=True, sha256=hashlib.sha256(data).hexdigest(), conflict=False)

    @_one_at_a_time
    def copy_in(self, src: Path, dest: str = WORKDIR) -> None:
        """See `Sandbox.copy_in` (the same packing and caps as the Docker sandbox's)."""
        data = transfer.pack_directory(src, self.max_copy_bytes, self.max_copy_files)
        transfer.safe_extract(data, self.host(dest), self.max_copy_bytes, self.max_copy_files)

    @_one_at_a_time
    def copy_out(self, dest: Path, src: str = WORKDIR) -> list[str]:
        """See `Sandbox.copy_out` (the same checks on the way out as the Docker sandbox's)."""
        data = transfer.pack_directory(self.host(src), self.max_copy_bytes, self.max_copy_files)
        return transfer.safe_extract(data, dest, self.max_copy_bytes, self.max_copy_files)

    def restart_channel(self) -> None:
        """Nothing to restart: there is no channel."""

    def close(self) -> None:
        """Remove the root folder if this runtime made it. Idempotent."""
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    # ---- helpers -----------------------------------------------------------------------------
    def _raise(self, exc: OSError, op: str, path: str) -> NoReturn:
        """Raise `exc` as the channel would have: the same type and message, sandbox paths."""
        filename = self.inside(str(exc.filename)) if exc.filename is not None else None
        raise_remote(RemoteError(type=type(exc).__name__, message=exc.strerror or str(exc), errno=exc.errno,
                                 filename=filename), op, path)

    def _capture(self, data: bytes, save_path: str, save: bool, head_bytes: int, tail_bytes: int,
                 error_pattern: str | None, save_over: tuple[int, int]) -> StreamCapture:
        lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        truncated = len(data) > head_bytes + tail_bytes
        head, tail = (data[:head_bytes], data[-tail_bytes:]) if truncated else (data, b"")
        errors: list[tuple[int, str]] = []
        total_errors = 0
        if error_pattern:
            found = re.compile(error_pattern.encode(), re.MULTILINE)
            for number, line in enumerate(data.split(b"\n"), 1):
                if line and found.search(line):
                    total_errors += 1
                    if len(errors) < ERROR_LINES_KEPT:
                        errors.append((number, escape_output(line[:ERROR_LINE_BYTES])))
        over_bytes, over_lines = save_over
        cut = truncated or bool(over_bytes and len(data) > over_bytes) or bool(over_lines and lines > over_lines)
        saved = data[:SAVE_BYTES] if cut and save else b""
        if saved:
            self.host(save_path).write_bytes(saved)
        return StreamCapture(head=escape_output(head), tail=escape_output(tail), total_bytes=len(data),
                             total_lines=lines,
                             truncated=truncated, error_lines=tuple(errors), error_lines_total=total_errors,
                             saved_path=save_path if saved else None, saved_bytes=len(saved))


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

"""Inspect AI's sandbox environment `harness` (`pip install 'harness[inspect]'`): a Task with
`sandbox="harness"` runs its tools in the harness's hardened, network-less Docker sandbox.

Registered through Inspect's extension entry point (`[project.entry-points.inspect_ai]` in
pyproject.toml), so nothing needs importing: `inspect eval task.py --sandbox harness`. The config is
`HarnessSandboxConfig` (`sandbox=("harness", HarnessSandboxConfig(project="repo"))`), or a string naming a
folder: a task folder (it holds task.json: its image with the requirements installed, and its files) or
any project folder (copied in). One sandbox per sample, removed at the sample's cleanup.

Inspect's contract (`inspect_ai.util.SandboxEnvironment`) as kept here:
- `exec` runs `cmd` (resolved through the sandbox's PATH, `env` applied by the channel) as the
  sandbox's one unprivileged user; another `user` raises `SandboxUserUnsupportedError`. stdout and
  stderr are captured byte for byte into files inside the sandbox and read back, so Inspect sees the
  exact output (not the escaped text the harness shows a model); a stream over Inspect's
  `MAX_EXEC_OUTPUT_SIZE` raises `OutputLimitExceededError` with the first part as `truncated_output`.
  A timeout kills the command and everything it started inside the sandbox and raises `TimeoutError`
  (the partial output as `truncated_output`); it is never retried (`timeout_retry` is accepted and
  ignored: the command really ran, a retry would run its effects twice). Exit 126 with "Permission
  denied" raises `PermissionError`; a missing program is an ordinary failed result (exit 127).
- `read_file` raises FileNotFoundError, IsADirectoryError, PermissionError as inside the sandbox, and
  `OutputLimitExceededError` over `MAX_READ_FILE_SIZE`; text is UTF-8, newlines kept as written.
- `write_file` creates missing parent folders; IsADirectoryError, PermissionError as inside.
- Relative paths and cwd are under /workspace (where the project is); /testbed is mapped onto it.
Every blocking call runs in a worker thread, one at a time per sandbox.
"""

from __future__ import annotations

import errno
import os
import posixpath
import shlex
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

import anyio
from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    SandboxUserUnsupportedError,
    sandboxenv,
)
from pydantic import BaseModel, ConfigDict

# Inspect loads this module (the entry point) to resolve a `harness/NAME`: importing the suite registers its
# task, solver and scorer under those names (harness/task_suite, ...)
from harness.integrations import inspect_suite
from harness.integrations._sandbox import AdapterSandbox, Target, open_for_adapter, sandbox_path
from sandbox.api import AGENT_UID, WORKDIR
from sandbox.docker_client import client_or_default
from sandbox.errors import SandboxError
from sandbox.reaper import reap

EXCHANGE_DIR = "/tmp/harness/inspect"
"""Where each exec's stdin, stdout and stderr are held inside the sandbox while it runs."""

NO_TIMEOUT = 24 * 3600.0
"""The channel needs a timeout; Inspect's None (no timeout) becomes a day."""

USERS = (None, "agent", str(AGENT_UID))
T = TypeVar("T")


class HarnessSandboxConfig(BaseModel):
    """What the sandbox holds and runs: at most one of `project`, `task`, `instances` + `instance_id`
    (see `harness.integrations._sandbox.Target`); `image` overrides the image. Unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    project: str | None = None
    task: str | None = None
    instances: str | None = None
    instance_id: str | None = None
    repos: str | None = None
    image: str | None = None

    def target(self) -> Target:
        return Target.from_config("inspect", project=self.project, task=self.task, instances=self.instances,
                                  instance_id=self.instance_id, repos=self.repos, image=self.image)


def config_target(config: SandboxEnvironmentConfigType | None, metadata: dict[str, Any] | None = None) -> Target:
    """The sandbox a config asks for: None (an empty workspace), a folder path, or the config model.
    A config with `instances` and no `instance_id` takes the sample's `metadata["instance_id"]`, so
    one task config serves every SWE-bench sample, each in its own instance's environment image."""
    if config is None:
        return Target(kind="inspect")
    if isinstance(config, str):
        folder = Path(config).expanduser()
        if (folder / "task.json").is_file():
            return Target(task=folder, kind="inspect")
        return Target(project=folder, kind="inspect")
    model = config if isinstance(config, HarnessSandboxConfig) else HarnessSandboxConfig(**config.model_dump())
    sample_instance = (metadata or {}).get("instance_id")
    if model.instances and not model.instance_id and isinstance(sample_instance, str):
        model = model.model_copy(update={"instance_id": sample_instance})
    return model.target()


@sandboxenv(name="harness")
class HarnessSandboxEnvironment(SandboxEnvironment):  # type: ignore[misc, unused-ignore]  # Any without the extra
    """One harness sandbox of one sample."""

    def __init__(self, sandbox: AdapterSandbox) -> None:
        super().__init__()
        self.sandbox = sandbox
        self._lock = threading.Lock()

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return HarnessSandboxConfig(**config)

    @classmethod
    def default_concurrency(cls) -> int | None:
        return max(1, os.cpu_count() or 1)        # each sandbox has a core (config.sandbox.limits.cpus)

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        """`inspect sandbox cleanup harness [SESSION]`: the harness sandboxes whose owner process is
        gone (never a live run's), or all of one session's."""
        await anyio.to_thread.run_sync(lambda: reap(client_or_default(), session=id))

    @classmethod
    async def sample_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                          metadata: dict[str, str]) -> dict[str, SandboxEnvironment]:
        target = config_target(config, metadata)
        sandbox = await anyio.to_thread.run_sync(lambda: open_for_adapter(target))
        return {"default": cls(sandbox)}

    @classmethod
    async def sample_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                             environments: dict[str, SandboxEnvironment], interrupted: bool) -> None:
        for environment in environments.values():
            await anyio.to_thread.run_sync(environment.as_type(cls).sandbox.close)

    async def _run(self, work: Callable[[], T]) -> T:
        def locked() -> T:
            with self._lock:
                return work()
        return await anyio.to_thread.run_sync(locked)

    async def exec(self, cmd: list[str], input: str | bytes | None = None, cwd: str | None = None,
                   env: dict[str, str] | None = None, user: str | None = None, timeout: int | None = None,
                   timeout_retry: bool = True, concurrency: bool = True) -> ExecResult[str]:
        if user not in USERS:
            raise SandboxUserUnsupportedError(
                f"the harness sandbox runs every command as its one unprivileged user (agent, uid {AGENT_UID}) "
                f"and has no root; got user={user!r}; leave user unset")
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        limit_str = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR
        return await self._run(lambda: self._exec(cmd, input, _cwd(cwd), env, timeout, limit, limit_str))

    def _exec(self, cmd: list[str], input: str | bytes | None, cwd: str, env: dict[str, str] | None,
              timeout: int | None, limit: int, limit_str: str) -> ExecResult[str]:
        box = self.sandbox.box
        base = f"{EXCHANGE_DIR}/{uuid.uuid4().hex}"
        stdin = "/dev/null"
        if input is not None:
            stdin = f"{base}.in"
            box.write_file(stdin, input.encode() if isinstance(input, str) else input)
        script = f"{shlex.join(cmd)} < {stdin} > {base}.out 2> {base}.err"
        prepare = box.exec(f"mkdir -p {EXCHANGE_DIR} && : > {base}.out && : > {base}.err", timeout=30,
                           save_output=False)
        if not prepare.ok:
            raise RuntimeError(f"the sandbox could not prepare the exec's files: {prepare.stderr.text[-400:]}")
        try:
            result = box.exec(script, timeout=float(timeout) if timeout is not None else NO_TIMEOUT, cwd=cwd,
                              env=env, save_output=False)
            stdout, stderr = (self._stream(f"{base}.{name}", limit) for name in ("out", "err"))
        finally:
            box.exec(f"rm -f {base}.in {base}.out {base}.err", timeout=30, save_output=False)
        if result.timed_out:
            error = TimeoutError(f"Command timed out after {timeout} seconds (killed in the sandbox)")
            error.truncated_output = _text(stdout[0]) + _text(stderr[0])  # type: ignore[attr-defined]
            raise error
        for data, size in (stdout, stderr):
            if size > limit:
                raise OutputLimitExceededError(limit_str, _text(data))
        out, err = _text(stdout[0]), _text(stderr[0])
        if result.exit_code == 126 and "Permission denied" in err:
            raise PermissionError(f"{cmd[0] if cmd else ''}: permission denied in the sandbox: {err.strip()[-300:]}")
        return ExecResult(success=result.exit_code == 0, returncode=result.exit_code, stdout=out, stderr=err)

    def _stream(self, path: str, limit: int) -> tuple[bytes, int]:
        found = self.sandbox.box.read_file(path, max_bytes=limit)
        return found.data, found.size

    async def write_file(self, file: str, contents: str | bytes) -> None:
        data = contents.encode("utf-8") if isinstance(contents, str) else contents
        await self._run(lambda: self._write(_path(file), data))

    def _write(self, path: str, data: bytes) -> None:
        try:
            self.sandbox.box.write_file(path, data)
        except SandboxError:
            # the channel reports errors other than its file errors (a read-only file system, EROFS) as
            # SandboxError; Inspect's contract says PermissionError when the user may not write there
            folder = posixpath.dirname(path) or "/"
            probe = self.sandbox.box.exec(f"d={shlex.quote(folder)}; while [ ! -e \"$d\" ]; do d=$(dirname \"$d\"); "
                                          "done; test -w \"$d\"", timeout=30, save_output=False)
            if probe.exit_code == 1:
                raise PermissionError(errno.EACCES, "Permission denied: the sandbox's user may not write here "
                                      "(only /workspace, /tmp and /home/agent are writable)", path) from None
            raise

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        limit = SandboxEnvironmentLimits.MAX_READ_FILE_SIZE
        found = await self._run(lambda: self.sandbox.box.read_file(_path(file), max_bytes=limit))
        if found.size > limit:
            raise OutputLimitExceededError(SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, None)
        return found.data.decode("utf-8") if text else found.data


def _cwd(cwd: str | None) -> str:
    if cwd is None:
        return WORKDIR
    return sandbox_path(cwd if cwd.startswith("/") else f"{WORKDIR}/{cwd}")


def _path(file: str) -> str:
    return sandbox_path(file if file.startswith("/") else f"{WORKDIR}/{file}")


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


__all__ = ["HarnessSandboxConfig", "HarnessSandboxEnvironment", "inspect_suite"]

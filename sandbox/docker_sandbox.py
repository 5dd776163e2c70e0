"""The Docker sandbox: one hardened, network-less container per session, driven through a channel.

The container runs `sleep infinity` under Docker's init; all work goes through the exec channel
(`sandbox/channel.py`). Its only files are the project's, copied into a tmpfs at /workspace.
"""

from __future__ import annotations

import base64
import io
import tarfile
import time
import uuid
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.types import LogConfig, Ulimit

from sandbox import copy as copying
from sandbox.api import AGENT_UID, OUTPUT_DIR, STATE_DIR, WORKDIR, ExecResult, FileData, Limits, SandboxSpec, \
    StreamCapture, WriteOutcome
from sandbox.channel import Channel
from sandbox.docker_client import client_or_default
from sandbox.errors import ChannelClosed, CopyError, SandboxError
from sandbox.reaper import owner_labels, reap
from sandbox.text import safe_text

BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/home/agent",
            "USER": "agent", "LANG": "C.UTF-8", "TERM": "dumb", "PYTHONDONTWRITEBYTECODE": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PIP_BREAK_SYSTEM_PACKAGES": "1",
            "GIT_TERMINAL_PROMPT": "0", "PAGER": "cat"}
IDLE_UID = 65534   # nobody: owns the container's main process, not the agent's files
_reaped_this_process = False


def container_options(spec: SandboxSpec) -> dict[str, Any]:
    """The hardening of a sandbox container, as `docker.containers.run` keyword arguments."""
    lim: Limits = spec.limits
    tmpfs_opts = f"rw,nosuid,nodev,uid={AGENT_UID},gid={AGENT_UID},mode=0755"
    return {
        "network_mode": "none",                       # no interface but loopback: nothing leaves
        "dns": ["127.0.0.1"], "dns_search": ["."],    # the host's resolver and search domains stay out
        # pid 1 and the idle main process run as `nobody`, never root; the channel and every command
        # run as the agent (exec user), who can therefore not signal them to stop the container
        "user": f"{IDLE_UID}:{IDLE_UID}",
        "cap_drop": ["ALL"],                          # no capabilities, even for setuid binaries
        "security_opt": ["no-new-privileges"],        # setuid/setcap cannot raise privileges
        "read_only": True,                            # the image cannot be altered
        "tmpfs": {WORKDIR: f"{tmpfs_opts},size={lim.workspace_size}",
                  "/tmp": f"{tmpfs_opts},size={lim.tmp_size}",
                  "/home/agent": f"{tmpfs_opts},size={lim.home_size}"},
        "pids_limit": lim.pids,                       # fork bombs stop here
        "mem_limit": lim.memory,
        "memswap_limit": lim.memory,                  # equal to memory: no swap
        "nano_cpus": int(lim.cpus * 1e9),
        "init": True,                                 # reaps zombies, forwards signals
        "ulimits": [Ulimit(name="fsize", soft=lim.file_size, hard=lim.file_size),
                    Ulimit(name="nofile", soft=lim.open_files, hard=lim.open_files)],
        "log_config": LogConfig(type=LogConfig.types.JSON, config={"max-size": lim.log_size, "max-file": "1"}),
        "ipc_mode": "private",
        "hostname": "sandbox",
        "environment": dict(BASE_ENV),                # nothing of the host's environment
        "use_config_proxy": False,                    # no proxy settings from the docker client config
        "labels": {**owner_labels(spec.session), "harness.kind": "sandbox", **spec.labels},
        "name": f"harness-{spec.session}-{uuid.uuid4().hex[:6]}",
    }


class DockerSandbox:
    """A running sandbox container. Use as a context manager; `close()` removes everything."""

    def __init__(self, spec: SandboxSpec, client: docker.DockerClient | None = None) -> None:
        self.spec = spec
        self.session = spec.session
        self._client = client
        self.container: Any = None
        self._channel: Channel | None = None
        self.started_at = 0.0

    # ---- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> "DockerSandbox":
        if self.container is None:   # `with` over an already started sandbox must not start a second one
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Create the container, open the channel, copy the project in.

        Raises:
            DockerUnavailable, ImageError, CopyError, ChannelError.
            SandboxError: it is already started.
        """
        global _reaped_this_process
        if self.container is not None:
            raise SandboxError(f"sandbox {self.session!r} is already started; use it, or close() it first")
        self._client = client_or_default(self._client)
        if not _reaped_this_process:
            reap(self._client)
            _reaped_this_process = True
        self.started_at = time.monotonic()
        try:
            self._client.images.get(self.spec.image)
        except docker.errors.ImageNotFound as exc:
            from sandbox.errors import ImageError
            raise ImageError(f"sandbox image {self.spec.image!r} does not exist; build it with "
                             "`harness sandbox build`") from exc
        try:
            self.container = self._client.containers.run(self.spec.image, ["sleep", "infinity"], detach=True,
                                                         **container_options(self.spec))
            self._channel = self._open_channel()
            self._channel.request({"op": "exec", "command": f"mkdir -p {OUTPUT_DIR} {STATE_DIR}",
                                   "timeout": 10, "env": self._env(None)})
            if self.spec.project_dir is not None:
                self.copy_in(Path(self.spec.project_dir))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self.container is not None:
            try:
                self.container.remove(force=True, v=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if exc.status_code != 409:   # 409: a reaper is already removing it
                    raise
            self.container = None

    def restart_channel(self) -> None:
        """Start a new channel; the old server, if it still exists (stopped, hung), is killed."""
        if self.container is None:
            raise SandboxError("the sandbox is closed; start a new one")
        old_pid = None
        if self._channel is not None:
            old_pid = self._channel.server_pid
            self._channel.close()
            self._channel = None
        self._channel = self._open_channel()
        if old_pid is not None:
            self._channel.request({"op": "exec", "command": f"kill -KILL {old_pid} 2>/dev/null", "timeout": 10,
                                   "env": self._env(None)})

    def _open_channel(self) -> Channel:
        assert self._client is not None and self.container is not None
        return Channel(self._client, self.container.id, f"{AGENT_UID}:{AGENT_UID}", self._env(None))

    def _env(self, extra: dict[str, str] | None) -> dict[str, str]:
        return {**BASE_ENV, **self.spec.env, **(extra or {})}

    def _request(self, payload: dict[str, Any], timeout: float | None = 60.0) -> dict[str, Any]:
        if self._channel is None:
            raise ChannelClosed("the exec channel is not running; call restart_channel()")
        answer = self._channel.request(payload, timeout)
        if not answer.get("ok"):
            _raise_remote(answer.get("error") or {}, payload)
        return answer

    # ---- commands and files ------------------------------------------------------------------
    def exec(self, command: str, timeout: float = 60.0, *, cwd: str = WORKDIR,
             env: dict[str, str] | None = None, error_pattern: str | None = None,
             save_output: bool = True, head_bytes: int = 32768, tail_bytes: int = 32768,
             save_over: tuple[int, int] = (0, 0)) -> ExecResult:
        """See `Sandbox.exec`. `save_over` = (bytes, lines): also save outputs larger than this (the
        caller's display budget), not only those larger than the head kept in memory."""
        answer = self._request({"op": "exec", "command": command, "timeout": timeout, "cwd": cwd,
                                "env": self._env(env), "error_pattern": error_pattern, "save": save_output,
                                "output_dir": OUTPUT_DIR, "head_bytes": head_bytes, "tail_bytes": tail_bytes,
                                "save_over_bytes": save_over[0], "save_over_lines": save_over[1]},
                               timeout=timeout + 30)
        if "spawn_error" in answer:
            raise SandboxError(f"could not start bash in the sandbox: {answer['spawn_error']}")
        return ExecResult(command=command, exit_code=int(answer["exit_code"]), duration=float(answer["duration"]),
                          timed_out=bool(answer["timed_out"]), stdout=_capture(answer["stdout"]),
                          stderr=_capture(answer["stderr"]), killed_leftovers=int(answer["killed_leftovers"]))

    def read_file(self, path: str, max_bytes: int | None = None) -> FileData:
        a = self._request({"op": "read", "path": path, "max_bytes": max_bytes})
        return FileData(path=path, realpath=a["realpath"], data=base64.b64decode(a["data"]), sha256=a["sha256"],
                        size=int(a["size"]))

    def write_file(self, path: str, data: bytes, *, expect_sha256: str | None = None,
                   mode: int | None = None) -> WriteOutcome:
        a = self._request({"op": "write", "path": path, "data": base64.b64encode(data).decode(),
                           "expect_sha256": expect_sha256, "mode": mode})
        return WriteOutcome(written=bool(a["written"]), sha256=a["sha256"], conflict=bool(a["conflict"]))

    def copy_in(self, src: Path, dest: str = WORKDIR) -> None:
        data = copying.pack_directory(src, self.spec.max_copy_bytes, self.spec.max_copy_files)
        self._request({"op": "put_tar", "dest": dest, "data": base64.b64encode(data).decode()}, timeout=300)

    def copy_out(self, dest: Path, src: str = WORKDIR) -> list[str]:
        a = self._request({"op": "get_tar", "src": src, "max_bytes": self.spec.max_copy_bytes,
                           "max_files": self.spec.max_copy_files, "exclude": sorted(copying.SKIP_DIRS)},
                          timeout=300)
        if a.get("too_large"):
            raise CopyError(f"{src} in the sandbox holds more than the copy limit ({self.spec.max_copy_files} "
                            f"files or {self.spec.max_copy_bytes} bytes); nothing was copied")
        return copying.safe_extract(base64.b64decode(a["data"]), dest, self.spec.max_copy_bytes,
                                    self.spec.max_copy_files)

    def archive(self, src: str = WORKDIR) -> tarfile.TarFile:
        """The tree at `src` as a checked in-memory tar (for diffing without touching the host disk)."""
        a = self._request({"op": "get_tar", "src": src, "max_bytes": self.spec.max_copy_bytes,
                           "max_files": self.spec.max_copy_files, "exclude": sorted(copying.SKIP_DIRS)},
                          timeout=300)
        if a.get("too_large"):
            raise CopyError(f"{src} in the sandbox holds more than the copy limit")
        tar = tarfile.open(fileobj=io.BytesIO(base64.b64decode(a["data"])), mode="r:")
        copying.check_members(tar, self.spec.max_copy_bytes, self.spec.max_copy_files)
        return tar


def _capture(d: dict[str, Any]) -> StreamCapture:
    lines = tuple((int(n), safe_text(base64.b64decode(t))) for n, t in d["error_lines"])
    return StreamCapture(head=safe_text(base64.b64decode(d["head"])), tail=safe_text(base64.b64decode(d["tail"])),
                         total_bytes=int(d["total_bytes"]), total_lines=int(d["total_lines"]),
                         truncated=bool(d["truncated"]), error_lines=lines,
                         error_lines_total=int(d["error_lines_total"]), saved_path=d.get("saved_path"),
                         saved_bytes=int(d.get("saved_bytes", 0)))


def _raise_remote(err: dict[str, Any], payload: dict[str, Any]) -> None:
    kind, message = err.get("type", "Error"), err.get("message", "unknown error")
    where = payload.get("path") or payload.get("src") or payload.get("dest") or ""
    builtin = {"FileNotFoundError": FileNotFoundError, "IsADirectoryError": IsADirectoryError,
               "NotADirectoryError": NotADirectoryError, "PermissionError": PermissionError,
               "FileExistsError": FileExistsError}.get(kind)
    if builtin is not None:
        raise builtin(err.get("errno") or 0, message, err.get("filename") or where)
    raise SandboxError(f"{payload.get('op')} {where!r} failed in the sandbox: {kind}: {message}")

"""The Docker sandbox: one hardened, network-less container per session, driven through a channel.

`DockerSandbox` composes the two halves: the container's life (`sandbox/deployment/docker.py`: the
hardening in `container_options()`, start, stop, reaping) and what runs inside it
(`sandbox/runtime/channel.py`: exec, read, write, tar over the exec channel). The container runs
`cat` on its lifeline under Docker's init (it ends with the harness process: `sandbox/deployment/lifeline.py`;
a container that stopped or vanished is `SandboxUnavailable`, with Docker's reason); its only files are
the project's, copied into a tmpfs at /workspace (or, with `SandboxSpec.project_from_image`, unpacked
there from the image's own packed copy of them, which an instance image carries). Copies are checked
on the host here (size, file count, unsafe members). An image that holds /opt/harness/overlay (files
its build added to its /workspace) gets them copied over the project at start; the variables an image
declares with ENV reach every command, under BASE_ENV and the spec's own.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import docker

from sandbox import transfer
from sandbox.agent_sweep import SweepReport, end_agent_processes
from sandbox.api import WORKDIR, ExecResult, FileData, SandboxSpec, WriteOutcome
from sandbox.deployment.docker import BASE_ENV, IDLE_UID, DockerDeployment, container_options
from sandbox.errors import ChannelClosed, SandboxError, SandboxUnavailable
from sandbox.host_channel import Channel
from sandbox.loopback import HttpHandler
from sandbox.relay import Relay
from sandbox.runtime.channel import ChannelRuntime

__all__ = ["BASE_ENV", "IDLE_UID", "OVERLAY", "PROJECT_ARCHIVE_LABEL", "DockerSandbox", "container_options"]

OVERLAY = "/opt/harness/overlay"
PROJECT_ARCHIVE_LABEL = "harness.project.archive"   # an image's packed copy of the project it was built for
T = TypeVar("T")


class DockerSandbox:
    """A running sandbox container. Use as a context manager; `close()` removes everything."""

    def __init__(self, spec: SandboxSpec, client: docker.DockerClient | None = None) -> None:
        self.spec = spec
        self.session = spec.session
        self.deployment = DockerDeployment(spec, client)
        self.runtime: ChannelRuntime | None = None
        self.last_sweep: SweepReport | None = None   # what the last sweep before a channel restart did
        self.relays: list[Relay] = []   # the loopback relays serving (`serve_loopback`), closed with the sandbox

    @property
    def container(self) -> Any:
        """The docker-py container, or None when not started."""
        return self.deployment.container

    @property
    def _client(self) -> docker.DockerClient | None:
        return self.deployment.client

    @property
    def _channel(self) -> Channel | None:
        return self.runtime.channel if self.runtime is not None else None

    # ---- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> DockerSandbox:
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
        packing = self._pack_ahead()
        self.start_blank()
        try:
            self.load_project(packing)
        except BaseException:
            self.close()
            raise

    def _pack_ahead(self) -> Future[bytes] | None:
        """The project's tar, packed on the host in a thread while the container and its channel start
        (a django-sized tree takes a few hundred ms to walk and pack); None when nothing is copied."""
        if self.spec.project_dir is None or self.spec.project_from_image:
            return None
        packing: Future[bytes] = Future()
        src, max_bytes, max_files = Path(self.spec.project_dir), self.spec.max_copy_bytes, self.spec.max_copy_files

        def pack() -> None:
            try:
                packing.set_result(transfer.pack_directory(src, max_bytes, max_files))
            except BaseException as exc:  # noqa: BLE001 - handed to load_project, which raises it
                packing.set_exception(exc)

        threading.Thread(target=pack, name=f"pack-{self.session}", daemon=True).start()
        return packing

    def start_blank(self) -> None:
        """Create the container and open the channel, without the project (see `load_project`): what a warm
        pool keeps ready (`sandbox.pool.SandboxPool`).

        Raises:
            DockerUnavailable, ImageError, ChannelError.
            SandboxError: it is already started.
        """
        if self.container is not None:
            raise SandboxError(f"sandbox {self.session!r} is already started; use it, or close() it first")
        self.deployment.start()
        try:
            env = {**self._image_env(), **BASE_ENV, **self.spec.env}
            self.runtime = ChannelRuntime(lambda: self.deployment.open_channel(env), env,
                                          clear=self._end_agent_processes)
        except BaseException:
            self.close()
            raise

    def load_project(self, packed: Future[bytes] | None = None) -> None:
        """Put `spec.project_dir`'s files into /workspace (copied, or unpacked from the image's packed copy),
        then the image's overlay. Nothing when the spec has no project. `packed`: the project's tar,
        being packed already (`start` packs it while the container starts).

        Raises:
            CopyError, ChannelError, SandboxError.
        """
        if self.spec.project_dir is not None:
            archive = self._project_archive() if self.spec.project_from_image else None
            if archive is None and packed is not None:
                self._live().put_tar(packed.result(), WORKDIR)
            elif archive is None:
                self.copy_in(Path(self.spec.project_dir))
            else:
                self._unpack(archive)
            self._apply_overlay()

    def _image_env(self) -> dict[str, str]:
        """The variables the image declares (its ENV: e.g. the tests' variables of an environment image);
        the container was created with BASE_ENV only, so nothing of the host's environment is among them."""
        declared = (self.container.attrs.get("Config") or {}).get("Env") or []
        return dict(item.split("=", 1) for item in declared if "=" in item)

    def _project_archive(self) -> str | None:
        """The path of the image's packed project (PROJECT_ARCHIVE_LABEL), or None."""
        labels = (self.container.attrs.get("Config") or {}).get("Labels") or {}
        path = labels.get(PROJECT_ARCHIVE_LABEL)
        if not path:
            return None
        if not re.fullmatch(r"(/[A-Za-z0-9._-]+)+", path) or "/../" in f"{path}/":
            raise SandboxError(f"the image {self.spec.image!r} names {path!r} as its project archive "
                               f"({PROJECT_ARCHIVE_LABEL}); expected a plain absolute path such as "
                               "/opt/harness/project/workspace.tar")
        return str(path)

    def _unpack(self, archive: str) -> None:
        """Unpack the image's packed project into WORKDIR, as the sandbox user (the archive holds only
        regular files, folders and links, as `transfer.pack_directory` made it)."""
        result = self._live().exec(f"tar -x --no-same-owner -p -f {archive} -C {WORKDIR}", timeout=300,
                                   save_output=False)
        if not result.ok:
            raise SandboxError(f"unpacking the image's project {archive} into {WORKDIR} failed (exit "
                               f"{result.exit_code}): {result.stderr.text[-2000:]}")

    def _apply_overlay(self) -> None:
        """Copy the image's OVERLAY (files an image build added to or changed in its /workspace, e.g. an
        install's metadata) onto the fresh /workspace, as the sandbox user, before anything else runs."""
        result = self._live().exec(f"if [ -d {OVERLAY} ]; then cp -a {OVERLAY}/. {WORKDIR}/; fi", timeout=120,
                                   save_output=False)
        if not result.ok:
            raise SandboxError(f"copying the image's {OVERLAY} onto {WORKDIR} failed (exit {result.exit_code}): "
                               f"{result.stderr.text[-2000:]}")

    def close(self) -> None:
        """Stop and remove the container and everything it created. Idempotent."""
        for relay in self.relays:
            relay.close(wait=1.0)
        self.relays = []
        if self.runtime is not None:
            self.runtime.close()
            self.runtime = None
        self.deployment.stop()

    def restart_channel(self) -> None:
        """Start a new channel once every process of the agent, the old server included (dead, stopped,
        hung), was killed from outside the container and none is left (`sandbox.agent_sweep`).

        Raises:
            SandboxError: the sandbox is closed, or some process of the agent survived (then no server is
                started and the sandbox is not used again).
            SandboxUnavailable: the container stopped or is gone (Docker's reason said).
            ChannelError: the new server did not start.
        """
        if self.container is None or self.runtime is None:
            raise SandboxError("the sandbox is closed; start a new one")
        if not self._still_running(settle=0):   # a dead container: no new channel, and no retry against it
            raise SandboxUnavailable(self.deployment.death())
        self.runtime.restart()

    def serve_loopback(self, port: int, handler: HttpHandler, *, workers: int = 8) -> Relay:
        """Serve `http://127.0.0.1:port` inside the sandbox with `handler` on the host (`sandbox.relay`): every
        HTTP request a process in the sandbox makes there is answered by `handler(request)`, on one of
        `workers` threads. The relay runs as nobody, so the agent can neither stop it nor take the port.
        Use the Relay as a context manager, or `close()` it; `close()` of the sandbox closes it too.

        Raises:
            RelayError: the port is not 1-65535 or is taken inside, or the relay did not start.
            SandboxError: the sandbox is closed.
        """
        if self._client is None or self.container is None:
            raise SandboxError("the sandbox is closed; start a new one")
        env = {"PATH": BASE_ENV["PATH"], "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        relay = Relay(self._client, self.container.id, port, handler, env=env, workers=workers)
        self.relays = [*(r for r in self.relays if r.alive), relay]
        return relay

    def _end_agent_processes(self) -> SweepReport:
        """Before a new channel server starts: end every process of the agent from outside, and prove it."""
        if self._client is None or self.container is None:
            raise SandboxError("the sandbox is closed; start a new one")
        self.last_sweep = end_agent_processes(self._client, self.container.id)
        return self.last_sweep

    def interrupt(self) -> SweepReport:
        """End every process of the agent from outside, the channel server's included (a budget ran out and
        the agent did not stop): a command in flight on another thread raises ChannelClosed, and the
        channel is used again only after `restart_channel()`. The relays, which run as nobody, go on.

        Raises:
            SandboxError: the sandbox is closed, or the daemon failed (`sandbox.agent_sweep`).
        """
        return self._end_agent_processes()

    def _live(self) -> ChannelRuntime:
        if self.runtime is None:
            raise ChannelClosed("the exec channel is not running; call restart_channel()")
        return self.runtime

    def _checked(self, call: Callable[[ChannelRuntime], T]) -> T:
        """`call` on the live channel; a channel that closed because the container itself stopped or vanished
        (OOM, killed from outside, the daemon restarted) is SandboxUnavailable, with Docker's reason."""
        try:
            return call(self._live())
        except ChannelClosed as exc:
            if self.container is not None and not self._still_running():
                raise SandboxUnavailable(self.deployment.death()) from exc
            raise

    def _still_running(self, settle: float = 1.0) -> bool:
        """Whether the container still runs, asked again for up to `settle` seconds: a killed container's
        channel closes a moment before the daemon calls it stopped (a channel's death alone is rare)."""
        deadline = time.monotonic() + settle
        while self.deployment.alive():
            if time.monotonic() > deadline:
                return True
            time.sleep(0.05)
        return False

    # ---- commands and files ------------------------------------------------------------------
    def exec(self, command: str, timeout: float = 60.0, *, cwd: str = WORKDIR,
             env: dict[str, str] | None = None, error_pattern: str | None = None,
             save_output: bool = True, head_bytes: int = 32768, tail_bytes: int = 32768,
             save_over: tuple[int, int] = (0, 0)) -> ExecResult:
        """See `Sandbox.exec`. `save_over` = (bytes, lines): also save outputs larger than this (the
        caller's display budget), not only those larger than the head kept in memory."""
        return self._checked(lambda live: live.exec(command, timeout, cwd=cwd, env=env, error_pattern=error_pattern,
                                                    save_output=save_output, head_bytes=head_bytes,
                                                    tail_bytes=tail_bytes, save_over=save_over))

    def read_file(self, path: str, max_bytes: int | None = None) -> FileData:
        """See `Sandbox.read_file`."""
        return self._checked(lambda live: live.read_file(path, max_bytes))

    def write_file(self, path: str, data: bytes, *, expect_sha256: str | None = None,
                   mode: int | None = None) -> WriteOutcome:
        """See `Sandbox.write_file`."""
        return self._checked(lambda live: live.write_file(path, data, expect_sha256=expect_sha256, mode=mode))

    def copy_in(self, src: Path, dest: str = WORKDIR) -> None:
        """See `Sandbox.copy_in`."""
        data = transfer.pack_directory(src, self.spec.max_copy_bytes, self.spec.max_copy_files)
        self._checked(lambda live: live.put_tar(data, dest))

    def copy_out(self, dest: Path, src: str = WORKDIR) -> list[str]:
        """See `Sandbox.copy_out`."""
        return transfer.safe_extract(self._tar_of(src), dest, self.spec.max_copy_bytes, self.spec.max_copy_files)

    def _tar_of(self, src: str) -> bytes:
        return self._checked(lambda live: live.get_tar(src, self.spec.max_copy_bytes, self.spec.max_copy_files,
                                                       sorted(transfer.SKIP_DIRS)))

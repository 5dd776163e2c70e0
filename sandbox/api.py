"""The narrow interface the rest of the world uses to talk to a sandbox.

`Sandbox` is a Protocol so that other implementations can plug in. `SandboxSpec.provider` names the one
that starts a spec, and `sandbox.factory` is the only place that constructs it: today "docker",
`sandbox.docker_sandbox.DockerSandbox` (a container from `sandbox/deployment/`, driven by
`sandbox/runtime/channel.py`). `sandbox.runtime.local.LocalRuntime` is a directory-backed double that only
tests use (no isolation); it is deliberately not a provider.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, get_args, runtime_checkable

WORKDIR = "/workspace"
"""Where the project's files live inside the sandbox; commands run here."""

OUTPUT_DIR = "/tmp/harness/output"
"""Where the full output of each command is saved (bounded), so it can be paged afterwards."""

STATE_DIR = "/tmp/harness/state"
"""Per-session state the harness keeps inside the sandbox (idempotency keys, fingerprints)."""

AGENT_UID = 1000

Progress = Callable[[str], None]
"""Where a long build (an image, a wheelhouse) reports what it is doing, one line at a time."""


def quiet(_: str) -> None:
    """The `Progress` that reports nothing."""


SandboxProvider = Literal["docker"]
"""Where a sandbox runs (`SandboxSpec.provider`; `sandbox.factory` maps each value to its implementation):
"docker" is a hardened, network-less container on the local Docker daemon. A second provider is a second
value here and a second entry in the factory's table, nothing else."""

PROVIDERS: tuple[SandboxProvider, ...] = get_args(SandboxProvider)


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox container. Every field is documented in docs/sandbox.md.

    The defaults suit a repair session on a small-to-medium Python project on a 2-core machine.
    """

    memory: str = "2g"            # cgroup memory limit; swap is set equal, so no swap is used
    cpus: float = 1.0             # CPU quota, in cores
    pids: int = 256               # process/thread limit: a fork bomb stops here
    workspace_size: str = "1g"    # tmpfs holding /workspace (counts against memory)
    tmp_size: str = "512m"        # tmpfs holding /tmp (saved outputs, pip caches)
    home_size: str = "128m"       # tmpfs holding the agent's home directory
    file_size: int = 512 * 1024 * 1024   # RLIMIT_FSIZE: largest file a process may write, bytes
    open_files: int = 1024        # RLIMIT_NOFILE
    log_size: str = "1m"          # container log cap (the log only holds the idle main process)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SandboxSpec:
    """What to start: which image, which files, which limits, which labels, and where (`provider`)."""

    image: str
    session: str
    project_dir: Path | None = None
    limits: Limits = field(default_factory=Limits)
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    max_copy_bytes: int = 512 * 1024 * 1024
    max_copy_files: int = 100_000
    # the image holds project_dir's files already, packed (an instance image: its PROJECT_ARCHIVE_LABEL
    # names the archive): unpack that instead of packing and sending project_dir; without the label,
    # project_dir is copied as usual
    project_from_image: bool = False
    # the channel moves from `docker exec`'s stream onto a unix socket in an empty read-only host folder
    # bound into the container, when the daemon runs on this machine (`sandbox/host_channel.py`); False: never
    direct_channel: bool = True
    provider: SandboxProvider = "docker"

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ValueError(f"sandbox provider {self.provider!r} is not one of {list(PROVIDERS)}; "
                             'e.g. SandboxSpec(image=..., session=..., provider="docker")')


@dataclass(frozen=True)
class StreamCapture:
    """One output stream of a command, bounded: head and tail kept, the rest counted and saved.

    `head` and `tail` are already made safe for a model and a terminal (see `sandbox.text`).
    When `truncated` is false, `head` holds the whole stream and `tail` is empty.
    """

    head: str
    tail: str
    total_bytes: int
    total_lines: int
    truncated: bool
    error_lines: tuple[tuple[int, str], ...] = ()   # (1-based line number, safe text)
    error_lines_total: int = 0                      # how many lines matched, including those not kept
    saved_path: str | None = None                   # the full stream inside the sandbox, if saved
    saved_bytes: int = 0                            # how much of it was saved (the save is capped)
    scanned_bytes: int = -1                         # error lines were looked for in this many first bytes
                                                    # and in the tail (-1: in the whole stream)

    @property
    def text(self) -> str:
        """The whole stream when it was not truncated, else head and tail joined."""
        return self.head if not self.truncated else self.head + self.tail


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one command. A non-zero exit or a timeout is a result, not an exception."""

    command: str
    exit_code: int              # the command's exit code; 128+N when killed by signal N
    duration: float             # seconds, measured inside the sandbox
    timed_out: bool
    stdout: StreamCapture
    stderr: StreamCapture
    killed_leftovers: int = 0   # processes the command left behind that were killed afterwards

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class FileData:
    path: str                   # as asked
    realpath: str               # after resolving symlinks inside the sandbox
    data: bytes
    sha256: str
    size: int                   # full size; `data` may be shorter when a byte cap applied


@dataclass(frozen=True)
class WriteOutcome:
    written: bool
    sha256: str                 # the file's fingerprint after the call (new when written)
    conflict: bool = False      # true when expect_sha256 did not match what the file holds


@runtime_checkable
class Sandbox(Protocol):
    """A running, isolated environment holding one project's files.

    Implementations are context managers; leaving the context removes everything they created.
    """

    session: str

    def exec(self, command: str, timeout: float = 60.0, *, cwd: str = WORKDIR,
             env: dict[str, str] | None = None, error_pattern: str | None = None,
             save_output: bool = True, save_over: tuple[int, int] = (0, 0)) -> ExecResult:
        """Run `command` with bash in its own process group.

        Output beyond what is kept in memory is saved under OUTPUT_DIR (bounded); with `save_over`
        = (bytes, lines), also any output larger than that (the caller's display budget).

        Raises:
            ChannelClosed: the channel died or stopped answering (the result of the command is
                unknown); the channel is not used again until `restart_channel()`.
        """
        ...

    def read_file(self, path: str, max_bytes: int | None = None) -> FileData:
        """Read a file (relative paths are under WORKDIR).

        Raises:
            FileNotFoundError, IsADirectoryError, PermissionError: as inside the sandbox.
            ChannelClosed: the channel died.
        """
        ...

    def write_file(self, path: str, data: bytes, *, expect_sha256: str | None = None,
                   mode: int | None = None) -> WriteOutcome:
        """Atomically replace a file's content (write to a temporary file, then rename).

        With `expect_sha256`, write only if the file currently has that fingerprint ("" means:
        only if the file does not exist); otherwise nothing is written and `conflict` is set.

        Raises:
            PermissionError, IsADirectoryError, NotADirectoryError: as inside the sandbox.
            ChannelClosed: the channel died.
        """
        ...

    def copy_in(self, src: Path, dest: str = WORKDIR) -> None:
        """Copy a host directory's files into the sandbox (regular files, dirs and symlinks).

        Raises:
            CopyError: the source holds more than the configured size or file count.
        """
        ...

    def copy_out(self, dest: Path, src: str = WORKDIR) -> list[str]:
        """Copy a sandbox directory out to `dest` on the host; returns the relative paths written.

        Never follows symlinks; refuses absolute paths, `..`, device files, and links that point
        outside `src`; caps total size and file count.

        Raises:
            CopyError: a member was unsafe or the caps were exceeded (nothing partial is kept).
        """
        ...

    def restart_channel(self) -> None:
        """Start a new exec channel after the old one died."""
        ...

    def close(self) -> None:
        """Stop and remove the container and everything it created. Idempotent."""
        ...

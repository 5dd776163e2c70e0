"""Exceptions raised by the sandbox package.

    SandboxError                    anything the sandbox could not do
    ├── DockerUnavailable           no Docker daemon answers (with the hint to start one)
    ├── ImageError                  the sandbox image is missing or could not be built
    ├── ChannelError                the exec channel inside the container died or spoke nonsense
    │   └── ChannelClosed           the channel is gone; `Sandbox.restart_channel()` starts a new one
    ├── SandboxUnavailable          the container itself stopped or vanished (OOM, killed from outside,
    │                               the daemon restarted): nothing can run there again; `reason` says why
    ├── CopyError                   copying files in or out was refused (unsafe path, link, size cap)
    └── RelayError                  the loopback relay (`sandbox.relay`) did not start, or ended on a bad frame

Command failures are not exceptions: a command that exits non-zero or times out is an `ExecResult`.
"""

from __future__ import annotations


class SandboxError(Exception):
    """Base class of every error the sandbox package raises."""


class DockerUnavailable(SandboxError):
    """The Docker daemon cannot be reached."""


class ImageError(SandboxError):
    """The sandbox image is missing or its build failed."""


class ChannelError(SandboxError):
    """The in-container exec channel misbehaved."""


class ChannelClosed(ChannelError):
    """The in-container exec channel is gone (its process died or the container stopped)."""


class CopyError(SandboxError):
    """A copy into or out of the sandbox was refused."""


class RelayError(SandboxError):
    """The loopback relay could not serve its port (taken, refused) or broke off (a frame it could not read)."""


class SandboxUnavailable(SandboxError):
    """The sandbox's container stopped or is gone: no command can run there again (a new sandbox can).

    `reason`: what Docker says (OOMKilled, the exit code, the signal it was killed with, its last log lines)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the sandbox's container is no longer running: {reason}")
        self.reason = reason

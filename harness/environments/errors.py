"""The environment builder's errors: both are infrastructure failures of one task, never the model's.

    SandboxError
      EnvironmentBuildError     the image could not be built (the message holds the build log's tail)
        EnvironmentUnsupported  it cannot be built offline at all: the caller records the task as unsupported
          SdistsDidNotBuild     source-only releases did not build into wheels offline (`packages` names them)
"""

from __future__ import annotations

from sandbox.errors import SandboxError


class EnvironmentBuildError(SandboxError):
    """A task's environment image could not be built (an infrastructure error, not the model's)."""


class EnvironmentUnsupported(EnvironmentBuildError):
    """A task's environment cannot be built offline here; `reason` says precisely why (Debian packages
    the sandbox image lacks, a C compiler, an sdist that does not build, a resolution that fails)."""

    def __init__(self, task_id: str, reason: str) -> None:
        super().__init__(f"task {task_id}: unsupported offline: {reason}")
        self.task_id = task_id
        self.reason = reason


class SdistsDidNotBuild(EnvironmentUnsupported):
    """Source-only releases did not build into wheels in the network-less build (C extensions with no
    compiler); `packages` are their project names, which a new resolution can take from later releases."""

    def __init__(self, task_id: str, reason: str, packages: frozenset[str]) -> None:
        super().__init__(task_id, reason)
        self.packages = packages

"""The one place a sandbox is made: the provider `SandboxSpec.provider` names, looked up in one table.

    create_sandbox(spec, client=None)   the provider's sandbox for `spec`, not started (a pool starts it
                                        blank, `open_sandbox` starts it whole)
    open_sandbox(spec, pool=None)       a started sandbox of `spec`: taken from `pool` when given (a blank
                                        with spec's project loaded), else started now; the caller closes it

Nothing else in `sandbox/` or `harness/` constructs a provider's class (tests/sandbox/test_factory.py
reads every module's AST to hold that), so the hardening a provider applies cannot be bypassed by a
caller that builds its own. A second provider is a value of `sandbox.api.SandboxProvider` and a row of
`_PROVIDERS`: every caller, pooled or not, then gets it through the spec alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import docker

from sandbox.api import PROVIDERS, SandboxProvider, SandboxSpec
from sandbox.docker_sandbox import DockerSandbox

__all__ = ["SandboxSource", "create_sandbox", "open_sandbox"]

_PROVIDERS: dict[SandboxProvider, Callable[[SandboxSpec, docker.DockerClient | None], DockerSandbox]] = {
    "docker": DockerSandbox,
}
assert set(_PROVIDERS) == set(PROVIDERS), "every SandboxProvider value has one row here"


class SandboxSource(Protocol):
    """Where started sandboxes can be taken from instead of started on the spot (`sandbox.pool.SandboxPool`)."""

    def take(self, spec: SandboxSpec) -> DockerSandbox: ...


def create_sandbox(spec: SandboxSpec, client: docker.DockerClient | None = None) -> DockerSandbox:
    """The sandbox `spec.provider` makes for `spec`, not started yet (`start()` or `start_blank()` it)."""
    return _PROVIDERS[spec.provider](spec, client)


def open_sandbox(spec: SandboxSpec, pool: SandboxSource | None = None) -> DockerSandbox:
    """A started sandbox of `spec`: from `pool` when given, else started now. The caller closes it.

    Raises:
        DockerUnavailable, ImageError, CopyError, ChannelError: as `DockerSandbox.start` raises them.
    """
    if pool is not None:
        return pool.take(spec)
    box = create_sandbox(spec)
    box.start()
    return box

"""The Docker sandbox: hardened, network-less containers that hold only a project's files.

Knows nothing of agents and never imports `harness`. This module is the public surface others use:
the `Sandbox` protocol and the values that cross it, and the exception tree. It imports only the
standard library, so that the channel server (shipped into the image beside `_protocol.py`, without
this file) and light callers do not pay for Docker. The Docker provider is `sandbox.docker_sandbox.
DockerSandbox` (a deployment, `sandbox.deployment`, plus a runtime, `sandbox.runtime`); images are
built by `sandbox.images`; hostile text is escaped by `sandbox.text`.

Private: `sandbox._protocol` (the channel's wire format, shared only with `sandbox.server`).
"""

from sandbox.api import (
    AGENT_UID,
    OUTPUT_DIR,
    STATE_DIR,
    WORKDIR,
    ExecResult,
    FileData,
    Limits,
    Progress,
    Sandbox,
    SandboxSpec,
    StreamCapture,
    WriteOutcome,
    quiet,
)
from sandbox.errors import (
    ChannelClosed,
    ChannelError,
    CopyError,
    DockerUnavailable,
    ImageError,
    SandboxError,
)

__all__ = [
    "AGENT_UID", "OUTPUT_DIR", "STATE_DIR", "WORKDIR",
    "ChannelClosed", "ChannelError", "CopyError", "DockerUnavailable", "ExecResult", "FileData", "ImageError",
    "Limits", "Progress", "Sandbox", "SandboxError", "SandboxSpec", "StreamCapture", "WriteOutcome", "quiet",
]

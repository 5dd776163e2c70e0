"""The Docker sandbox: hardened, network-less containers that hold only a project's files.

Knows nothing of agents and never imports `harness`. This module is the public surface others use:
the `Sandbox` protocol and the values that cross it, and the exception tree. It imports only the
standard library, so that the channel server (shipped into the image beside `_protocol.py`, without
this file) and light callers do not pay for Docker. The Docker provider is `sandbox.docker_sandbox.
DockerSandbox` (a deployment, `sandbox.deployment`, plus a runtime, `sandbox.runtime`); images are
built by `sandbox.images`; hostile text is escaped by `sandbox.text`. Those heavier names are listed
here too and loaded on first use (`sandbox.surface.lazy_names`), so importing `sandbox` still costs
only the standard library.

Private: `sandbox._protocol` (the channel's wire format, shared only with `sandbox.server`).
"""

from typing import TYPE_CHECKING

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
from sandbox.surface import lazy_names

__all__ = [
    "lazy_names",
    "AGENT_UID", "BASE_LABEL", "build_context", "ChannelClosed", "ChannelError", "client_or_default",
    "CopyError", "DockerDeployment", "DockerSandbox", "DockerUnavailable", "ensure_image", "escape_ident",
    "escape_output", "escape_unsafe", "ExecResult", "FileData",
    "HttpHandler", "HttpRequest", "HttpResponse", "image_exists", "image_tag", "ImageError",
    "Limits", "open_sandbox", "OUTPUT_DIR", "pack_directory", "Progress", "PROJECT_ARCHIVE_LABEL", "prune",
    "PYTHON_LABEL", "PYTHON_RELEASES", "quiet", "reap", "reap_all", "remove_containers", "safe_extract", "safe_json",
    "Sandbox", "SandboxError", "SandboxPool", "SandboxSource", "SandboxSpec", "SandboxUnavailable", "STATE_DIR",
    "StreamCapture", "TOOLCHAIN_PACKAGES", "transfer", "WarmPool", "WORKDIR", "WriteOutcome",
]


# Names other packages use, loaded on first use: importing the package costs nothing (sandbox.surface).
if TYPE_CHECKING:
    from sandbox import transfer
    from sandbox.deployment import DockerDeployment
    from sandbox.docker_client import client_or_default
    from sandbox.docker_sandbox import PROJECT_ARCHIVE_LABEL, DockerSandbox
    from sandbox.errors import SandboxUnavailable
    from sandbox.factory import SandboxSource, open_sandbox
    from sandbox.images import (
        BASE_LABEL,
        PYTHON_LABEL,
        PYTHON_RELEASES,
        TOOLCHAIN_PACKAGES,
        build_context,
        ensure_image,
        image_exists,
        image_tag,
        prune,
    )
    from sandbox.loopback import HttpHandler, HttpRequest, HttpResponse
    from sandbox.pool import SandboxPool, WarmPool
    from sandbox.reaper import reap, reap_all, remove_containers
    from sandbox.text import escape_ident, escape_output, escape_unsafe, safe_json
    from sandbox.transfer import pack_directory, safe_extract

__getattr__ = lazy_names(__name__, {
    "sandbox.deployment": ("DockerDeployment",),
    "sandbox.docker_client": ("client_or_default",),
    "sandbox.docker_sandbox": ("DockerSandbox", "PROJECT_ARCHIVE_LABEL"),
    "sandbox.errors": ("SandboxUnavailable",),
    "sandbox.factory": ("SandboxSource", "open_sandbox"),
    "sandbox.images": ("BASE_LABEL", "PYTHON_LABEL", "PYTHON_RELEASES", "TOOLCHAIN_PACKAGES", "build_context",
                       "ensure_image", "image_exists", "image_tag", "prune"),
    "sandbox.loopback": ("HttpHandler", "HttpRequest", "HttpResponse"),
    "sandbox.pool": ("SandboxPool", "WarmPool"),
    "sandbox.reaper": ("reap", "reap_all", "remove_containers"),
    "sandbox.text": ("escape_ident", "escape_output", "escape_unsafe", "safe_json"),
    "sandbox.transfer": ("pack_directory", "safe_extract", "transfer"),
})

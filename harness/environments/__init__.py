"""Task environments: host-built wheelhouses and the environment images built from them.

Used by the session (the image a task runs in), the `pip_download` tool (the same wheel download) and
evaluation (grading images). Imports harness.core, harness.checks, harness.errors and sandbox only.
"""

from harness.environments.images import EnvironmentBuildError, ensure_env_image, env_hash, sandbox_image
from harness.environments.wheelhouse import WheelhouseError, build_wheelhouse, checked, download_wheels

__all__ = [
    "EnvironmentBuildError", "WheelhouseError", "build_wheelhouse", "checked", "download_wheels",
    "ensure_env_image", "env_hash", "sandbox_image",
]

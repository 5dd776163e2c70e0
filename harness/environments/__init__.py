"""Task environments: host-built wheelhouses and the environment images built from them.

Used by the session (the image a task runs in), the `pip_download` tool (the same wheel download) and
evaluation (grading images). Tasks with an `Environment` recipe get a shared venv environment image and
a thin instance image (`resolved.py`, recipe text in `venv.py`); one that cannot be built offline raises
`EnvironmentUnsupported`. Imports harness.core, harness.checks, harness.errors and sandbox only.
"""

from harness.environments.errors import EnvironmentBuildError, EnvironmentUnsupported
from harness.environments.images import ensure_env_image, env_hash, sandbox_image
from harness.environments.resolved import ensure_environment_image
from harness.environments.wheelhouse import WheelhouseError, build_wheelhouse, checked, download_wheels

__all__ = [
    "EnvironmentBuildError", "EnvironmentUnsupported", "WheelhouseError", "build_wheelhouse", "checked",
    "download_wheels", "ensure_env_image", "ensure_environment_image", "env_hash", "sandbox_image",
]

"""The image a task's sandbox runs in: the one public entry point of the image builders.

    sandbox_image(config, python, task)   the base: the sandbox image for the task's Python, with
                                          the Debian packages its recipe needs (a variant)
    ensure_task_image(task, base)         on that base, a recipe task's instance image (`instance_image.py`,
                                          on its shared venv image, `venv_image.py`), or another task's
                                          image of pinned requirements (`pinned_image.py`)
"""

from __future__ import annotations

import docker

from harness.config import Config
from harness.core.task import Task
from harness.environments.errors import EnvironmentUnsupported
from harness.environments.instance_image import ensure_instance_image
from harness.environments.pinned_image import ensure_pinned_image
from harness.environments.recipe import system_packages, unsupported
from sandbox.api import Progress, quiet
from sandbox.docker_client import client_or_default
from sandbox.errors import ImageError
from sandbox.images import ensure_image


def sandbox_image(config: Config, python: str, progress: Progress = quiet, task: Task | None = None) -> str:
    """The sandbox image to run in: config.sandbox.image, or with "auto" the one built locally for
    `python` (built now if it does not exist yet), with the Debian packages `task`'s environment recipe
    needs (a variant; see `recipe.system_packages`).

    Raises:
        EnvironmentUnsupported: the recipe cannot be followed offline (`recipe.unsupported`, checked
            first), or the variant with the recipe's packages could not be made (the mirror does
            not have one of them, say); the reason holds the build's words.
        ImageError: the sandbox image itself could not be built.
    """
    if task is not None and task.environment is not None:
        unsupported(task.id, task.environment)     # before building anything for it
    if config.sandbox.image != "auto":
        return config.sandbox.image
    packages = system_packages(task.environment) if task is not None else ()
    if not packages:
        return ensure_image(python=python, base=config.sandbox.base, progress=progress)
    assert task is not None
    try:
        return ensure_image(python=python, base=config.sandbox.base, progress=progress, packages=packages)
    except ImageError as exc:
        raise EnvironmentUnsupported(task.id, f"the sandbox image with the recipe's Debian packages "
                                              f"{list(packages)} could not be made offline: {exc}") from exc


def ensure_task_image(task: Task, base_image: str, *, client: docker.DockerClient | None = None,
                      progress: Progress = quiet, direct_references: bool = False, env_tag: str | None = None) -> str:
    """The tag of the image `task`'s sandbox runs in, built on `base_image` if it does not exist yet.
    A task with an `environment` recipe gets its instance image on a shared venv image (`env_tag`: that
    shared image, when the caller already has it from `ensure_venv_image`); the others get one image of
    their pinned requirements, a requirement given as a URL (a wheel file) fetched only with
    `direct_references`.

    Raises:
        EnvironmentUnsupported: (recipe tasks) the environment cannot be built offline; the reason says why.
        EnvironmentBuildError: the wheelhouse or the image could not be made.
    """
    client = client_or_default(client)
    if task.environment is not None:
        return ensure_instance_image(task, base_image, client=client, progress=progress, env_tag=env_tag)
    return ensure_pinned_image(task, base_image, client=client, progress=progress,
                               direct_references=direct_references)

"""The environment image of a recipe task: FROM the sandbox image (with the recipe's Debian packages), a venv
at /opt/harness/venv holding exactly its lock's distributions (`locking.py` makes or finds the lock;
building never resolves), installed offline from files downloaded on the host and checked against the
lock's sha256; the lock's sdists come built from their own image (`sdist_image.py`). The wheelhouse
(/opt/harness/env/wheels, pip's find-links in every later step) also holds, uninstalled, the lock's build
wheels and the wheels its rows' trees require beyond it (`Lock.row_wheels`): an instance's offline
install takes them as pip online would. One image per lock
and base image, shared by every task of it: `harness-env:venv-<hash of the lock's files, the recipe and
the base image>`, the same tag on every machine for the same lock. The Dockerfile and the scripts it
runs are in `recipe.py`.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from pathlib import Path

import docker

from harness.core.task import Task
from harness.environments.errors import EnvironmentBuildError
from harness.environments.lock import Lock
from harness.environments.lock_files import fetch_files
from harness.environments.locking import environment_lock
from harness.environments.recipe import RECIPE_VERSION, env_dockerfile, env_files, unsupported
from harness.environments.sdist_image import ensure_sdists_image
from harness.environments.tags import HASH_LABEL, KEY_LABEL, KIND_LABEL, LOCK_LABEL, REPOSITORY, build_lock
from sandbox.api import Progress, quiet
from sandbox.errors import ImageError
from sandbox.images import BASE_LABEL, build_context, image_exists


def ensure_venv_image(task: Task, base_image: str, *, client: docker.DockerClient,
                      progress: Progress = quiet) -> str:
    """The tag of the environment image `task` shares with every task of its lock, built if missing.

    Raises:
        EnvironmentUnsupported: it cannot be built offline; the reason names what is missing.
        EnvironmentBuildError: the build failed, or the lock cannot be satisfied (`LockUnsatisfiable`).
    """
    env = task.environment
    if env is None:
        raise EnvironmentBuildError(f"task {task.id} has no resolved environment (Task.environment is None)")
    unsupported(task.id, env)
    lock = environment_lock(task, base_image, client=client, progress=progress)
    return build_from_lock(lock, base_image, client=client, task_id=task.id, key=env.key, progress=progress)


def venv_tag(lock: Lock, base_image: str) -> str:
    """The environment image's tag for `lock` on `base_image`: a function of the lock's files, the recipe's
    texts and the base image only."""
    sdists = bool(lock.sdists())
    text = env_dockerfile(sdists=sdists, rows=bool(lock.row_wheels), labels={})
    digest = hashlib.sha256(json.dumps([RECIPE_VERSION, base_image, text,
                                        env_files(lock), lock.files_digest()]).encode()).hexdigest()[:16]
    return f"{REPOSITORY}:venv-{digest}"


def build_from_lock(lock: Lock, base_image: str, *, client: docker.DockerClient, task_id: str, key: str,
                    progress: Progress = quiet) -> str:
    """The tag of the environment image of `lock`, built if missing (never resolving anything).

    Raises:
        SdistsDidNotBuild: the lock's sdists do not build here (the lock cannot be followed).
        EnvironmentBuildError: a file could not be had as the lock says, or the build failed.
    """
    tag = venv_tag(lock, base_image)
    digest = tag.rsplit("-", 1)[1]
    labels = {HASH_LABEL: digest, BASE_LABEL: base_image, KIND_LABEL: "environment", KEY_LABEL: key,
              LOCK_LABEL: lock.key.relative_path()}
    with build_lock(digest):
        if image_exists(client, tag):
            return tag
        started = time.monotonic()
        progress(f"building environment {tag} ({key}, Python {lock.key.python}) from the lock "
                 f"{lock.key.relative_path()}: {len(lock.packages)} distribution(s), {len(lock.sdists())} of them "
                 f"sdists, toolchain {' '.join(f.pin() for f in lock.toolchain)}")
        sdists = ensure_sdists_image(lock, base_image, client=client, task_id=task_id, progress=progress) \
            if lock.sdists() else None
        with tempfile.TemporaryDirectory(prefix="harness-venv-") as tmp:
            ctx = Path(tmp)
            (ctx / "env").mkdir()
            for name, text in env_files(lock).items():
                (ctx / "env" / name).write_text(text)
            fetch_files(lock.wheelhouse(), ctx / "env" / "wheels", progress)   # the rows' wheels too
            (ctx / "Dockerfile").write_text(env_dockerfile(sdists=sdists is not None, rows=bool(lock.row_wheels),
                                                           labels=labels))
            args = {"BASE_IMAGE": base_image, **({"SDISTS_IMAGE": sdists} if sdists else {})}
            try:
                build_context(client, ctx, tag, labels={}, progress=progress, buildargs=args)
            except ImageError as exc:
                raise EnvironmentBuildError(str(exc)) from exc
        progress(f"built {tag} in {time.monotonic() - started:.1f}s")
        return tag

"""The image of a lock's source-only releases built into wheels: FROM the sandbox image, the lock's
toolchain in a venv, its wheels installed (what the sdists need to build: numpy, Cython), then each sdist
built with `pip wheel --no-build-isolation` network-less, the wheels left in /opt/harness/env/built for
the environment image (`venv_image.py`) to copy. `harness-env:sdists-<hash of the lock's files, the
scripts and the base image>`: built once per lock, whether the lock is being made (the build says
which sdists do not build offline, `locking.py`) or an environment is built from it.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from pathlib import Path

import docker

from harness.environments.errors import EnvironmentBuildError, SdistsDidNotBuild
from harness.environments.lock import Lock
from harness.environments.lock_files import fetch_files
from harness.environments.recipe import FAILED_SDISTS, RECIPE_VERSION, SDIST_DOCKERFILE, env_files, sdist_dockerfile
from harness.environments.tags import HASH_LABEL, KIND_LABEL, REPOSITORY, build_lock
from sandbox.api import Progress, quiet
from sandbox.errors import ImageError
from sandbox.images import BASE_LABEL, build_context, image_exists


def sdists_tag(lock: Lock, base_image: str) -> str:
    digest = hashlib.sha256(json.dumps([RECIPE_VERSION, base_image, SDIST_DOCKERFILE, env_files(lock),
                                        lock.files_digest()]).encode()).hexdigest()[:16]
    return f"{REPOSITORY}:sdists-{digest}"


def ensure_sdists_image(lock: Lock, base_image: str, *, client: docker.DockerClient, task_id: str,
                        progress: Progress = quiet) -> str:
    """The tag of the image of `lock`'s sdists built into wheels, built if missing.

    Raises:
        SdistsDidNotBuild: some did not build offline (`packages` names their projects).
        EnvironmentBuildError: the files could not be had (`lock_files.LockUnsatisfiable` among them), or
            the build failed otherwise.
    """
    tag = sdists_tag(lock, base_image)
    digest = tag.rsplit("-", 1)[1]
    with build_lock(digest):
        if image_exists(client, tag):
            return tag
        started = time.monotonic()
        sdists = lock.sdists()
        progress(f"building {len(sdists)} source-only release(s) into wheels offline: "
                 f"{' '.join(f.filename for f in sdists)} ({tag})")
        with tempfile.TemporaryDirectory(prefix="harness-sdists-") as tmp:
            ctx = Path(tmp)
            for name, text in env_files(lock).items():
                (ctx / "env").mkdir(exist_ok=True)
                (ctx / "env" / name).write_text(text)
            fetch_files(lock.wheels(), ctx / "env" / "wheels", progress)
            fetch_files(sdists, ctx / "sdists", progress)
            labels = {HASH_LABEL: digest, BASE_LABEL: base_image, KIND_LABEL: "sdists"}
            (ctx / "Dockerfile").write_text(sdist_dockerfile(labels))
            _build(client, ctx, tag, base_image, task_id, lock, progress)
        progress(f"built {tag} in {time.monotonic() - started:.1f}s")
        return tag


def _build(client: docker.DockerClient, ctx: Path, tag: str, base_image: str, task_id: str, lock: Lock,
           progress: Progress) -> None:
    try:
        build_context(client, ctx, tag, labels={}, progress=progress, buildargs={"BASE_IMAGE": base_image})
    except ImageError as exc:
        if FAILED_SDISTS in str(exc):
            names = str(exc).split(FAILED_SDISTS, 1)[1].splitlines()[0].split()
            packages = frozenset(f.name for f in lock.sdists() if f.filename in names)
            raise SdistsDidNotBuild(task_id, f"sdist(s) {names} did not build into wheels offline (no C compiler "
                                             f"in the image, or a build dependency missing): {exc}", packages) from exc
        raise EnvironmentBuildError(str(exc)) from exc

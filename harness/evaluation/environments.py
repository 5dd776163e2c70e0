"""Task environment images: the sandbox image for the task's Python, plus its pinned requirements
installed offline from a host-built wheelhouse, plus (with `install_cmd`) the project installed.

An environment image is tagged and labelled by a hash of everything that goes into it (the sandbox
image, the requirements, the install command and, only when there is one, the project's files),
so tasks with equal environments share one image and nothing is rebuilt while its inputs stand.
Builds run with `docker build --network none`. A failed build raises `EnvironmentBuildError`, which
the batch runner records as an infrastructure error of that task, never as a model failure.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import docker
import docker.errors

from harness.evaluation.tasks import Task
from harness.evaluation.wheelhouse import WheelhouseError, applicable, build_wheelhouse
from sandbox.docker_client import client_or_default
from sandbox.errors import ImageError, SandboxError
from sandbox.images import BASE_LABEL, build_context, image_exists

REPOSITORY = "harness-env"
HASH_LABEL = "harness.env.hash"
RECIPE_VERSION = "1"
Progress = Callable[[str], None]

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


class EnvironmentBuildError(SandboxError):
    """A task's environment image could not be built (an infrastructure error, not the model's)."""


def _quiet(_: str) -> None:
    return None


def env_hash(task: Task, base_image: str) -> str:
    h = hashlib.sha256(f"{RECIPE_VERSION}\n{base_image}\n{task.python}\n".encode())
    h.update("\n".join(sorted(task.requirements)).encode())
    if task.install_cmd:
        h.update(f"\ninstall:{task.install_cmd}\n".encode())
        h.update(tree_hash(task.repo_dir).encode())
    return h.hexdigest()[:16]


def tree_hash(root: Path) -> str:
    """A hash of the names and contents of the files under `root`."""
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def dockerfile(task: Task, base_image: str) -> str:
    lines = [f"FROM {base_image}", "USER root",
             "COPY requirements.txt /opt/harness/env/requirements.txt"]
    if applicable(list(task.requirements), task.python):
        lines += ["COPY wheels/ /opt/harness/env/wheels/",
                  "RUN python3 -m pip install --no-index --no-cache-dir --ignore-installed "
                  "--disable-pip-version-check --find-links /opt/harness/env/wheels "
                  "-r /opt/harness/env/requirements.txt"]
    if task.install_cmd:
        lines += ["COPY --chown=1000:1000 repo/ /workspace/",
                  "RUN command -v pip >/dev/null || ln -s \"$(command -v pip3)\" /usr/local/bin/pip",
                  f"RUN cd /workspace && {task.install_cmd}"]
    lines += ["USER agent", "WORKDIR /workspace"]
    return "\n".join(lines) + "\n"


def ensure_env_image(task: Task, base_image: str, *, client: docker.DockerClient | None = None,
                     progress: Progress = _quiet) -> str:
    """The tag of `task`'s environment image, built on `base_image` if it does not exist yet.

    Raises:
        EnvironmentBuildError: the wheelhouse or the image could not be made.
    """
    client = client_or_default(client)
    digest = env_hash(task, base_image)
    tag = f"{REPOSITORY}:{digest}"
    with _lock(digest):
        if image_exists(client, tag):
            return tag
        started = time.monotonic()
        progress(f"building environment {tag} for {task.id}: Python {task.python}, "
                 f"{len(task.requirements)} requirement(s)" + (", project installed" if task.install_cmd else ""))
        with tempfile.TemporaryDirectory(prefix="harness-env-") as tmp:
            _context(task, base_image, Path(tmp), progress)
            _build(client, Path(tmp), tag, digest, base_image, progress)
        progress(f"built {tag} in {time.monotonic() - started:.1f}s")
        return tag


def _context(task: Task, base_image: str, ctx: Path, progress: Progress) -> None:
    reqs = applicable(list(task.requirements), task.python)
    (ctx / "requirements.txt").write_text("".join(r + "\n" for r in reqs))
    (ctx / "Dockerfile").write_text(dockerfile(task, base_image))
    if reqs:
        try:
            wheels = build_wheelhouse(list(task.requirements), task.python, progress)
        except WheelhouseError as exc:
            raise EnvironmentBuildError(str(exc)) from exc
        shutil.copytree(wheels, ctx / "wheels", ignore=shutil.ignore_patterns(".complete"))
    if task.install_cmd:
        shutil.copytree(task.repo_dir, ctx / "repo", symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", ".git"))


def _build(client: docker.DockerClient, ctx: Path, tag: str, digest: str, base_image: str,
           progress: Progress) -> None:
    try:
        build_context(client, ctx, tag, labels={HASH_LABEL: digest, BASE_LABEL: base_image}, progress=progress)
    except ImageError as exc:
        raise EnvironmentBuildError(str(exc)) from exc


def _lock(digest: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(digest, threading.Lock())

"""Environment images of tasks whose requirements are pinned by hand: the sandbox image for the task's
Python, plus its pinned requirements installed offline from a host-built wheelhouse, plus (with
`install_cmd`) the project installed.

The Dockerfile is fixed text: nothing a task supplies is ever pasted into it (an `install_cmd` line
such as ``ADD http://...`` or ``COPY --from=<image>`` would otherwise be a Dockerfile instruction run
by the daemon, with the host's network and images). The task's parts are files of the build context:
`requirements.txt` (validated requirements, one per line), `wheels/`, `repo/` and `install.sh` (the
install command, run with bash in /workspace); the base image is a build argument.

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
import time
from pathlib import Path

import docker
from packaging.requirements import Requirement

from harness.core.task import Task
from harness.environments.errors import EnvironmentBuildError
from harness.environments.recipe import ENV_DIR, RECIPE_VERSION
from harness.environments.tags import HASH_LABEL, KIND_LABEL, REPOSITORY, build_lock, tree_hash
from harness.environments.wheelhouse import WheelhouseError, build_wheelhouse, checked
from sandbox.api import Progress
from sandbox.errors import ImageError
from sandbox.images import BASE_LABEL, build_context, image_exists


def env_hash(task: Task, base_image: str) -> str:
    """The hash of everything that goes into `task`'s pinned image on `base_image` (its tag is REPOSITORY:hash)."""
    h = hashlib.sha256(f"{RECIPE_VERSION}\n{base_image}\n{task.python}\n".encode())
    h.update("\n".join(sorted(task.requirements)).encode())
    if task.install_cmd:
        h.update(f"\ninstall:{task.install_cmd}\n".encode())
        h.update(tree_hash(task.repo_dir).encode())
    return h.hexdigest()[:16]


_ENV = ENV_DIR
_DOCKERFILE = ("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nUSER root\n"
               f"COPY requirements.txt {_ENV}/requirements.txt\n")
_WHEELS = (f"COPY wheels/ {_ENV}/wheels/\n"
           "RUN python3 -m pip install --no-index --no-cache-dir --ignore-installed --disable-pip-version-check "
           f"--find-links {_ENV}/wheels -r {_ENV}/requirements.txt\n")
_INSTALL = ("COPY --chown=1000:1000 repo/ /workspace/\n"
            f"COPY install.sh {_ENV}/install.sh\n"
            "RUN command -v pip >/dev/null || ln -s \"$(command -v pip3)\" /usr/local/bin/pip\n"
            f"RUN cd /workspace && bash {_ENV}/install.sh\n")
_END = "USER agent\nWORKDIR /workspace\n"


def dockerfile(*, wheels: bool, install: bool) -> str:
    """The environment's Dockerfile: fixed text, chosen only by whether there are wheels and an install step."""
    return _DOCKERFILE + (_WHEELS if wheels else "") + (_INSTALL if install else "") + _END


def ensure_pinned_image(task: Task, base_image: str, *, client: docker.DockerClient, progress: Progress,
                        direct_references: bool = False) -> str:
    """The tag of the image of `task`'s pinned requirements (and project install) on `base_image`, built
    if it does not exist yet. A requirement or dependency given as a URL (a wheel file) is fetched only
    with `direct_references`.

    Raises:
        EnvironmentBuildError: the wheelhouse or the image could not be made.
    """
    digest = env_hash(task, base_image)
    tag = f"{REPOSITORY}:{digest}"
    with build_lock(digest):
        if image_exists(client, tag):
            return tag
        started = time.monotonic()
        progress(f"building environment {tag} for {task.id}: Python {task.python}, "
                 f"{len(task.requirements)} requirement(s)" + (", project installed" if task.install_cmd else ""))
        with tempfile.TemporaryDirectory(prefix="harness-env-") as tmp:
            _context(task, Path(tmp), progress, direct_references)
            _build(client, Path(tmp), tag, digest, base_image, progress)
        progress(f"built {tag} in {time.monotonic() - started:.1f}s")
        return tag


def _context(task: Task, ctx: Path, progress: Progress, direct_references: bool) -> None:
    try:
        reqs = checked(list(task.requirements), task.python, direct_references=direct_references)
    except WheelhouseError as exc:
        raise EnvironmentBuildError(f"task {task.id}: {exc}") from exc
    (ctx / "requirements.txt").write_text("".join(_offline(r) + "\n" for r in reqs))
    (ctx / "Dockerfile").write_text(dockerfile(wheels=bool(reqs), install=bool(task.install_cmd)))
    if reqs:
        try:
            wheels = build_wheelhouse(list(task.requirements), task.python, progress,
                                      direct_references=direct_references)
        except WheelhouseError as exc:
            raise EnvironmentBuildError(str(exc)) from exc
        shutil.copytree(wheels, ctx / "wheels", ignore=shutil.ignore_patterns(".complete"))
    if task.install_cmd:
        shutil.copytree(task.repo_dir, ctx / "repo", symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", ".git"))
        (ctx / "install.sh").write_text(task.install_cmd + "\n")


def _offline(requirement: str) -> str:
    """A requirements.txt line for the offline install: a direct reference becomes its name (its wheel is
    in the wheelhouse)."""
    req = Requirement(requirement)
    if req.url is None:
        return requirement
    req.url = None
    return str(req)


def _build(client: docker.DockerClient, ctx: Path, tag: str, digest: str, base_image: str,
           progress: Progress) -> None:
    try:
        labels = {HASH_LABEL: digest, BASE_LABEL: base_image, KIND_LABEL: "pinned"}
        build_context(client, ctx, tag, labels=labels, progress=progress,
                      buildargs={"BASE_IMAGE": base_image})
    except ImageError as exc:
        raise EnvironmentBuildError(str(exc)) from exc

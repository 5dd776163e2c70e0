"""The environment image of a recipe: FROM the sandbox image (with the recipe's Debian packages), a venv
at /opt/harness/venv holding the resolved pins (`recipe_pins.py`), installed offline from wheels
downloaded on the host; sdist-only pins are built into wheels in a first, network-less stage of the
same build. One image per (environment key, Python, resolution, recipe), shared by every task of it:
`harness-env:venv-<hash>`. The Dockerfile and the scripts it runs are in `recipe.py`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from pathlib import Path

import docker

from harness.core.task import Environment, Task
from harness.environments.errors import EnvironmentBuildError, EnvironmentUnsupported, SdistsDidNotBuild
from harness.environments.recipe import FAILED_SDISTS, RECIPE_VERSION, env_dockerfile, unsupported, venv_scripts
from harness.environments.recipe_pins import (
    build_only_wheels,
    failed_sdists,
    forward_or_leave_out,
    pinned_packages,
    remember_failed_sdists,
    resolved_pins,
)
from harness.environments.resolution import SdistOnly, requirement_name
from harness.environments.tags import HASH_LABEL, KEY_LABEL, KIND_LABEL, REPOSITORY, build_lock
from harness.environments.wheelhouse import WheelhouseError, download_sdist, pinned_wheelhouse
from sandbox.api import Progress, quiet
from sandbox.errors import ImageError
from sandbox.images import BASE_LABEL, build_context, image_exists


def ensure_venv_image(task: Task, base_image: str, *, client: docker.DockerClient,
                      progress: Progress = quiet) -> str:
    """The tag of the environment image `task` shares with every task of its recipe, built if missing.

    Raises:
        EnvironmentUnsupported: it cannot be built offline; the reason names what is missing.
        EnvironmentBuildError: the build failed.
    """
    env = task.environment
    if env is None:
        raise EnvironmentBuildError(f"task {task.id} has no resolved environment (Task.environment is None)")
    unsupported(task.id, env)
    forward: set[str] = set()
    leave_out: set[str] = set()
    pins, sdists, toolchain = resolved_pins(task, env, progress)
    known = {requirement_name(s.name) for s in sdists} & failed_sdists(task.python)
    if known:          # they did not build before: take their first releases with a wheel straight away
        forward |= known
        pins, sdists, toolchain = forward_or_leave_out(task, env, progress, forward, leave_out)
        # and those that have no release with a wheel at all (pywatchman on 3.11): left out straight away,
        # not built again for every instance to fail the same way
        still = ({requirement_name(s.name) for s in sdists} & known) - pinned_packages(env)
        if still:
            forward -= still
            leave_out |= still
            progress(f"{task.id}: {sorted(still)} did not build offline before and have no release with a wheel "
                     f"for Python {task.python}; leaving them out (optional test dependencies)")
            pins, sdists, toolchain = forward_or_leave_out(task, env, progress, forward, leave_out)
    for _ in range(3):
        try:
            return build_venv_image(task, env, base_image, pins, sdists, toolchain, client=client,
                                    progress=progress, build_wheels=build_only_wheels(task, env, pins, progress))
        except SdistsDidNotBuild as exc:
            remember_failed_sdists(task.python, exc.packages)
            again = exc.packages & forward         # no later release with a wheel helped: leave them out
            if again & pinned_packages(env):       # the official recipe pins it: it cannot be left out
                raise
            forward |= exc.packages - again
            leave_out |= again
            progress(f"{task.id}: {sorted(exc.packages)} did not build offline; resolving again "
                     + (f"with the first releases of {sorted(exc.packages - again)} that have a wheel for Python "
                        f"{task.python}" if exc.packages - again else "")
                     + (f"; leaving out {sorted(again)} (optional test dependencies)" if again else ""))
            pins, sdists, toolchain = forward_or_leave_out(task, env, progress, forward, leave_out)
    raise EnvironmentUnsupported(task.id, f"source-only releases still do not build offline after taking later "
                                          f"releases of {sorted(forward)} and leaving out {sorted(leave_out)}")


def build_venv_image(task: Task, env: Environment, base_image: str, pins: list[str], sdists: list[SdistOnly],
                     toolchain: list[str], *, client: docker.DockerClient, progress: Progress = quiet,
                     build_wheels: list[str] | None = None) -> str:
    """The tag of the environment image for these pins, built if missing (shared by every task of them).
    `build_wheels` are put in the wheelhouse only (for the project's isolated build), never installed.

    Raises:
        EnvironmentUnsupported: an sdist did not build into a wheel offline.
        EnvironmentBuildError: the wheels could not be downloaded, or the build failed otherwise.
    """
    files = {"toolchain.txt": "".join(p + "\n" for p in toolchain),
             "requirements.txt": "".join(p + "\n" for p in [*pins, *(f"{s.name}=={s.version}" for s in sdists)]),
             "wheel-requirements.txt": "".join(p + "\n" for p in pins), **venv_scripts()}
    if build_wheels:   # only then: the images of environments without them keep their tags
        files["build-wheels.txt"] = "".join(p + "\n" for p in build_wheels)
    h = hashlib.sha256(json.dumps([RECIPE_VERSION, base_image, task.python, env.key, env_dockerfile(
        sdists=bool(sdists), labels={}), files, [(s.filename, s.sha256) for s in sdists]]).encode())
    digest = h.hexdigest()[:16]
    tag = f"{REPOSITORY}:venv-{digest}"
    labels = {HASH_LABEL: digest, BASE_LABEL: base_image, KIND_LABEL: "environment", KEY_LABEL: env.key}
    with build_lock(digest):
        if image_exists(client, tag):
            return tag
        started = time.monotonic()
        progress(f"building environment {tag} ({env.key}, Python {task.python}): {len(pins)} wheel(s), "
                 f"{len(sdists)} sdist(s) to build, toolchain {' '.join(toolchain)}")
        with tempfile.TemporaryDirectory(prefix="harness-venv-") as tmp:
            ctx = Path(tmp)
            _fill_context(ctx, task, files, [*pins, *toolchain], sdists, build_wheels, progress)
            (ctx / "Dockerfile").write_text(env_dockerfile(sdists=bool(sdists), labels=labels))
            _build(client, ctx, tag, base_image, task.id, sdists, progress)
        progress(f"built {tag} in {time.monotonic() - started:.1f}s")
        return tag


def _fill_context(ctx: Path, task: Task, files: dict[str, str], wanted: list[str], sdists: list[SdistOnly],
                  build_wheels: list[str] | None, progress: Progress) -> None:
    """The build context: `files` and the wheels of `wanted` (and `build_wheels`) in env/, the sdists in sdists/.

    Raises:
        EnvironmentUnsupported: the wheels or sdists could not be downloaded.
    """
    (ctx / "env").mkdir()
    (ctx / "sdists").mkdir()
    for name, text in files.items():
        (ctx / "env" / name).write_text(text)
    try:
        wheels = pinned_wheelhouse(wanted, task.python, progress)
        # apart: a name may be there twice (numpy for the build and for the venv), which one pip
        # download refuses
        extra = pinned_wheelhouse(build_wheels, task.python, progress) if build_wheels else None
        for sdist in sdists:
            download_sdist(sdist.url, sdist.filename, sdist.sha256, ctx / "sdists", progress)
    except WheelhouseError as exc:
        raise EnvironmentUnsupported(task.id, f"the environment's files could not be downloaded: {exc}") from exc
    shutil.copytree(wheels, ctx / "env" / "wheels", ignore=shutil.ignore_patterns(".complete"))
    if extra is not None:
        shutil.copytree(extra, ctx / "env" / "wheels", ignore=shutil.ignore_patterns(".complete"),
                        dirs_exist_ok=True)


def _build(client: docker.DockerClient, ctx: Path, tag: str, base_image: str, task_id: str,
           sdists: list[SdistOnly], progress: Progress) -> None:
    """`docker build` of the context (network-less).

    Raises:
        SdistsDidNotBuild: the sdist stage said which sdists did not build (`FAILED_SDISTS`).
        EnvironmentBuildError: the build failed otherwise.
    """
    try:
        build_context(client, ctx, tag, labels={}, progress=progress, buildargs={"BASE_IMAGE": base_image})
    except ImageError as exc:
        if FAILED_SDISTS in str(exc):
            names = str(exc).split(FAILED_SDISTS, 1)[1].splitlines()[0].split()
            packages = frozenset(requirement_name(s.name) for s in sdists if s.filename in names)
            raise SdistsDidNotBuild(task_id, f"sdist(s) {names} did not build into wheels offline "
                                             f"(no C compiler in the image, or a build dependency "
                                             f"missing): {exc}", packages) from exc
        raise EnvironmentBuildError(str(exc)) from exc

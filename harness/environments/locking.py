"""The lock of a recipe task's environment, found or made once (`lock.py` says what a lock holds).

    environment_lock(task, base)   the shipped lock of the task's (repository, version, interpreter), else
                                   the one in the user cache, else one made now and kept there
    lock_identity(task, env)       its key and the digest of the recipe it is made from

Making a lock is a function of its inputs only: the recipe, the version's date and tree (`versions.py`),
and what the index and a network-less build say. The project's declarations, build requirements and
the recipe's pins are resolved as of the version's date (`recipe_pins.py`), each pin's file is read
from the index, and source-only releases are built into wheels right away (`sdist_image.py`): those
that do not build offline are taken at their first release with a wheel for the target, or left out
when they never had one (optional test dependencies), and resolved again. The lock then carries the
wheels that the version's rows require beyond it, each row's tree read and its extra requirements
resolved as of its date (`row_wheels.py`): on first use, the row that needs the lock; for the shipped
locks, every row of the version (`bench/lock_versions.py`). Nothing remembered from
another lock or an earlier run changes that path; the lock's `outcome` records it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime

import docker

from harness.core.task import Environment, Task
from harness.environments.declarations import build_requires, project_name, read_declarations
from harness.environments.errors import EnvironmentBuildError, EnvironmentUnsupported, SdistsDidNotBuild
from harness.environments.lock import (
    OWN,
    Lock,
    LockInputs,
    LockKey,
    LockOutcome,
    find_lock,
    recipe_digest,
    store_lock,
    target_platform,
)
from harness.environments.lock_files import locked_files, locked_sdist
from harness.environments.own_version import tree_version
from harness.environments.recipe_pins import build_only_wheels, forward_or_leave_out, pinned_packages
from harness.environments.resolution import IndexUnreachable, ResolveError, SdistOnly, exclude_newer, requirement_name
from harness.environments.row_wheels import RowTree, row_of, with_row_wheels
from harness.environments.sdist_image import ensure_sdists_image
from harness.environments.tags import build_lock
from harness.environments.versions import version_date, version_tree
from sandbox.api import Progress, quiet
from sandbox.docker_client import client_or_default

MAX_ATTEMPTS = 4       # resolutions: the first, then one more for each round of sdists that did not build


def lock_identity(task: Task, env: Environment) -> tuple[LockKey, str]:
    """The key of `task`'s lock and the digest of the recipe it must be made from. A version of the spec
    table is keyed by (repo, version) and its recipe names the environment_setup_commit (whose date is
    the version's); a task that brings its own requirements is keyed by its recipe's content: its pins,
    its date (created_at, else today), and its project's declared and build requirements."""
    parts: dict[str, object] = {
        "python": task.python, "pins": sorted(env.pins), "requirements": sorted(env.requirements),
        "package_files": list(env.package_files), "any_requirements_file": env.any_requirements_file,
        "extras": sorted(env.extras), "pre_install": list(env.pre_install)}
    if env.version_of is not None:
        parts["setup_commit"] = env.setup_commit
        recipe = recipe_digest(parts)
        return LockKey(env.version_of[0], env.version_of[1], task.python, target_platform(task.python)), recipe
    parts["as_of"] = env.as_of or datetime.now(UTC).strftime("%Y-%m-%d")
    parts["declared"] = [] if env.requirements else sorted(read_declarations(
        task.repo_dir, files=env.package_files, extras=env.extras, any_requirements_file=env.any_requirements_file,
        edits=env.pre_install).texts())
    parts["build_requires"] = sorted(build_requires(task.repo_dir))
    recipe = recipe_digest(parts)
    return LockKey(OWN, recipe[:16], task.python, target_platform(task.python)), recipe


def environment_lock(task: Task, base_image: str, *, client: docker.DockerClient | None = None,
                     progress: Progress = quiet) -> Lock:
    """The lock of `task`'s environment: found (shipped, then cached) or made and cached.

    Raises:
        EnvironmentUnsupported: no lock can be made (a resolution fails; sdists that never build offline
            and cannot be left out).
        EnvironmentBuildError: a build the lock needed failed otherwise.
    """
    env = task.environment
    assert env is not None
    key, recipe = lock_identity(task, env)
    found = find_lock(key, recipe, progress)
    if found is not None:
        return found
    with build_lock(f"lock {key.relative_path()}"):
        found = find_lock(key, recipe, quiet)      # made meanwhile by another task of this run
        if found is not None:
            return found
        row = row_of(task)          # the instance's own tree: what its install will require
        lock = make_lock(task, env, key, recipe, base_image, rows=() if row is None else (row,), client=client,
                         progress=progress)
        path = store_lock(lock)
        progress(f"{task.id}: locked {env.key}: {len(lock.packages)} distribution(s) as of {lock.inputs.as_of} "
                 f"({lock.inputs.as_of_from}), written to {path}")
        return lock


def make_lock(task: Task, env: Environment, key: LockKey, recipe: str, base_image: str, *,
              rows: Sequence[RowTree] = (), client: docker.DockerClient | None = None,
              progress: Progress = quiet) -> Lock:
    """A new lock of `env` (see the module docstring); Docker (`client`, else the default) only when it
    has source-only releases to build. It carries the wheels that `rows` (the version's rows, each with
    its own tree) require beyond its packages (`row_wheels.py`).

    Raises:
        EnvironmentUnsupported: the resolution failed, or sdists still do not build after MAX_ATTEMPTS.
        EnvironmentBuildError: the index could not be read.
    """
    chain = _Chain(task, env, key, recipe, progress)
    for _ in range(MAX_ATTEMPTS):
        lock = chain.candidate()
        if lock.sdists():
            try:
                ensure_sdists_image(lock, base_image, client=client_or_default(client), task_id=task.id,
                                    progress=progress)
            except SdistsDidNotBuild as exc:
                chain.did_not_build(lock, exc)
                continue
        return lock_with_rows(lock, env, rows, own=chain.own, task_id=task.id, progress=progress)
    raise EnvironmentUnsupported(task.id, f"source-only releases still do not build offline after taking later "
                                          f"releases of {sorted(chain.forward)} and leaving out "
                                          f"{sorted(chain.leave_out)}")


class _Chain:
    """The resolutions of one lock: each candidate resolved with the projects taken forward (at their first
    release with a wheel) or left out so far, which grow only with what this lock's own sdists did."""

    def __init__(self, task: Task, env: Environment, key: LockKey, recipe: str, progress: Progress) -> None:
        self.env, self.key, self.recipe, self.progress = env, key, recipe, progress
        self.dated = version_date(task, env)
        tree, self.tree_said = version_tree(task, env, progress)
        self.task = dataclasses.replace(task, repo_dir=tree,
                                        environment=dataclasses.replace(env, as_of=self.dated.as_of))
        self.own = project_name(tree)    # the project itself is installed by its install command, never locked
        version = tree_version(tree)
        if version is not None:
            progress(f"{task.id}: {version.name}, the project itself, is resolved at {version.release} (its tree "
                     f"declares {version.declared!r} in {version.origin}); never locked")
        elif self.own is not None:
            progress(f"{task.id}: {self.own}, the project itself, declares no static version in its tree; resolved "
                     "without it, a dependency may require a release of it the instance does not install")
        self.forward: set[str] = set()
        self.leave_out: set[str] = set()
        self.failed: list[str] = []
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
            self.progress(f"{self.task.id}: {text}")

    def resolved(self) -> tuple[list[str], list[SdistOnly], list[str]]:
        work = self.task.environment
        assert work is not None
        return forward_or_leave_out(self.task, work, self.progress, self.forward, self.leave_out)

    def candidate(self) -> Lock:
        """The lock of the next resolution (its sdists not built yet).

        Raises:
            EnvironmentUnsupported: the resolution failed, or its files are not on the index.
            EnvironmentBuildError: the index could not be read (the network).
        """
        pins, sdists, toolchain = self.resolved()
        again = {requirement_name(s.name) for s in sdists} & self.forward - pinned_packages(self.env)
        if again:       # they did not build, and have no later release with a wheel: the same sdist would fail
            self.forward -= again
            self.leave_out |= again
            self.note(f"{sorted(again)} have no release with a wheel for Python {self.task.python}; leaving them "
                      "out (optional test dependencies)")
            pins, sdists, toolchain = self.resolved()
        pins, sdists = self.without_project(pins, sdists)
        assert self.task.environment is not None
        build = build_only_wheels(self.task, self.task.environment, pins, self.progress)
        python = self.task.python
        try:
            return Lock(key=self.key, inputs=LockInputs(self.recipe, exclude_newer(self.dated.as_of), self.dated.said,
                                                        self.tree_said, _requirements(self.task, self.env),
                                                        tuple(sorted(self.env.pins))),
                        toolchain=locked_files(toolchain, python),
                        packages=tuple(sorted((*locked_files(pins, python), *map(locked_sdist, sdists)),
                                              key=lambda f: f.name)),
                        build_only=locked_files(build, python),
                        outcome=LockOutcome(tuple(sorted(self.failed)), tuple(sorted(self.forward)),
                                            tuple(sorted(self.leave_out)), tuple(self.notes)))
        except IndexUnreachable as exc:   # this machine's network, not the task's: never recorded as unsupported
            raise EnvironmentBuildError(f"task {self.task.id}: the resolution's files could not be locked: "
                                        f"{exc}") from exc
        except ResolveError as exc:
            raise EnvironmentUnsupported(self.task.id, f"the resolution's files could not be locked: {exc}") from exc

    def did_not_build(self, lock: Lock, exc: SdistsDidNotBuild) -> None:
        """Take forward the projects whose sdists did not build, or leave out those taken forward already.

        Raises:
            SdistsDidNotBuild: `exc`, when the recipe pins one that cannot be left out.
        """
        self.failed += [f.filename for f in lock.sdists() if f.name in exc.packages]
        stuck = set(exc.packages & self.forward)       # a later release with a wheel did not help: left out
        if stuck & pinned_packages(self.env):          # the recipe pins it: it cannot be left out
            raise exc
        moved = exc.packages - stuck
        self.forward |= moved
        self.leave_out |= stuck
        self.note(f"{sorted(exc.packages)} did not build offline; "
                  + (f"taking the first releases of {sorted(moved)} with a wheel for Python {self.task.python}"
                     if moved else "")
                  + (f"; leaving out {sorted(stuck)} (optional test dependencies)" if stuck else ""))

    def without_project(self, pins: list[str], sdists: list[SdistOnly]) -> tuple[list[str], list[SdistOnly]]:
        """`pins` and `sdists` without the project's own distribution (a dependency may require it: packaging
        for pytest): the instance's install provides it, and could not replace a copy the venv holds. Only a
        project whose tree declares no static version is ever among them (`own_version.py`): the others are
        resolved at their tree's release and never pinned."""
        own = self.own
        if own is None or not any(requirement_name(p) == own for p in pins) and \
                not any(requirement_name(s.name) == own for s in sdists):
            return pins, sdists
        self.note(f"{own}, the project itself, is required by a dependency: installed by the project's install, "
                  "not locked")
        return [p for p in pins if requirement_name(p) != own], [s for s in sdists if requirement_name(s.name) != own]


def lock_with_rows(lock: Lock, env: Environment, rows: Sequence[RowTree], *, own: str | None, task_id: str,
                   progress: Progress = quiet) -> Lock:
    """`lock` carrying the wheels `rows` need beyond it (`row_wheels.with_row_wheels`).

    Raises:
        EnvironmentBuildError: the index could not be read.
        EnvironmentUnsupported: a resolved release's file is not on the index.
    """
    try:
        return with_row_wheels(lock, env, rows, own=own, progress=progress)
    except IndexUnreachable as exc:   # this machine's network, not the task's: never recorded as unsupported
        raise EnvironmentBuildError(f"task {task_id}: the rows' wheels could not be locked: {exc}") from exc
    except ResolveError as exc:
        raise EnvironmentUnsupported(task_id, f"the rows' wheels could not be locked: {exc}") from exc


def _requirements(task: Task, env: Environment) -> tuple[str, ...]:
    """What the resolution started from, for the lock's record: the task's own requirements, or the
    declarations read from the version's tree; with the build requirements."""
    if env.requirements:
        declared = list(env.requirements)
    else:
        declared = read_declarations(task.repo_dir, files=env.package_files, extras=env.extras,
                                     any_requirements_file=env.any_requirements_file, edits=env.pre_install).texts()
    return tuple(sorted({*declared, *build_requires(task.repo_dir)}))

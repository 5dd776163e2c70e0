"""The pins of a recipe task's environment (`Task.environment`, the SWE-bench rows): the project's
declarations (or the recipe's own requirements) plus its build requirements plus the recipe's pins,
resolved as of the task's date (`resolver.py`), and the toolchain (pip, setuptools, wheel) of that era.

    resolved_pins(task, env)      (pins, sdist-only pins, toolchain pins); `forward` and `leave_out`
                                  for source-only releases that do not build offline
    build_only_wheels(...)        the build requirements' own pins, for the isolated build only

`locking.py` turns them into a lock; nothing here remembers what happened to another environment.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from datetime import UTC, datetime

from packaging.requirements import Requirement

from harness.core.task import Environment, Task
from harness.environments.declarations import build_requires, read_declarations
from harness.environments.errors import EnvironmentBuildError, EnvironmentUnsupported
from harness.environments.own_version import tree_version
from harness.environments.recipe import TOOLCHAIN, TOOLCHAIN_FLOOR
from harness.environments.resolution import (
    IndexUnreachable,
    ResolveError,
    SdistOnly,
    exclude_newer,
    is_exact_pin,
    requirement_name,
)
from harness.environments.resolver import resolve
from sandbox.api import Progress


def resolved_pins(task: Task, env: Environment, progress: Progress, forward: Collection[str] = (),
                  leave_out: Collection[str] = ()) -> tuple[list[str], list[SdistOnly], list[str]]:
    """(the project's pins without the toolchain, its sdist-only pins, the toolchain pins).

    The toolchain is resolved as of the task's date or the interpreter's floor (`TOOLCHAIN_FLOOR`),
    whichever is later; an exact pin of pip, setuptools or wheel in `env.pins` replaces it. So are the
    packages `env.pins` names without a version (the recipe's test tools, which the official harness
    installs as of its image build): requests of 2012 is tested with a pytest that runs on Python 3.9.
    The project itself is taken at the release its tree declares (`own_version.py`), so that no dependency
    requiring another release of it is chosen (sphinxcontrib-applehelp 1.0.7, Sphinx>=5, for Sphinx 4.0).

    Raises:
        EnvironmentUnsupported: a resolution failed (uv's words in the reason).
        EnvironmentBuildError: the package index could not be read (the network).
    """
    as_of = env.as_of or datetime.now(UTC).strftime("%Y-%m-%d")
    pins = list(env.pins)
    if env.requirements:
        requirements = [*env.requirements, *build_requires(task.repo_dir)]
    else:
        declared = read_declarations(task.repo_dir, files=env.package_files, extras=env.extras,
                                     any_requirements_file=env.any_requirements_file, edits=env.pre_install)
        for item in declared.unreadable:
            progress(f"{task.id}: not read: {item.origin}: {item.reason}")
        requirements = [*declared.texts(), *build_requires(task.repo_dir)]
        if env.pre_install:
            unedited = read_declarations(task.repo_dir, files=env.package_files, extras=env.extras,
                                         any_requirements_file=env.any_requirements_file)
            tree_own = [*unedited.texts(), *build_requires(task.repo_dir)]
        else:
            tree_own = requirements
        requirements = _keep_pins_of_other_trees(task, pins, requirements, tree_own, progress)
    pins = _yield_to_declarations(task, pins, requirements, progress)
    own = tree_version(task.repo_dir)
    project = own.pin() if own is not None else ""
    exact = {requirement_name(p): p for p in pins if is_exact_pin(p)}
    ranges = [p for p in pins if requirement_name(p) in TOOLCHAIN and requirement_name(p) not in exact]
    try:
        cutoff = max(exclude_newer(as_of), exclude_newer(TOOLCHAIN_FLOOR.get(task.python, "2021-01-01")))
        tools = resolve(list(TOOLCHAIN), task.python, cutoff, pins=ranges, progress=progress).pins
        if not requirements and not pins:
            return [], [], sorted(exact.get(requirement_name(p), p) for p in tools if requirement_name(p) in TOOLCHAIN)
        given = [*pins]
        floor = TOOLCHAIN_FLOOR.get(task.python, "2021-01-01")
        wanted = [p for p in pins if requirement_name(p) not in TOOLCHAIN and not Requirement(p).specifier]
        if wanted and exclude_newer(floor) > exclude_newer(as_of):
            # the recipe's test tools and their dependencies as of the floor, taken as exact pins
            ran = resolve(wanted, task.python, floor, pins=list(exact.values()), project=project,
                          progress=progress).pins
            taken = [p for p in ran if requirement_name(p) not in exact and requirement_name(p) not in TOOLCHAIN]
            given = [p for p in pins if p not in wanted] + taken
        result = resolve(requirements, task.python, as_of, pins=given, forward=forward, leave_out=leave_out,
                         project=project, progress=progress)
    except IndexUnreachable as exc:   # this machine's network, not the task's: never recorded as unsupported
        raise EnvironmentBuildError(f"task {task.id}: {exc}") from exc
    except ResolveError as exc:
        raise EnvironmentUnsupported(task.id, f"the dependencies do not resolve offline-ready: {exc}") from exc
    toolchain = sorted(exact.get(requirement_name(p), p) for p in tools if requirement_name(p) in TOOLCHAIN)
    chosen = {requirement_name(p) for p in toolchain}
    sdist_names = {requirement_name(s.name) for s in result.sdist_only}
    pins = [p for p in result.pins if requirement_name(p) not in chosen and requirement_name(p) not in sdist_names]
    return pins, list(result.sdist_only), toolchain


def forward_or_leave_out(task: Task, env: Environment, progress: Progress, forward: set[str],
                          leave_out: set[str]) -> tuple[list[str], list[SdistOnly], list[str]]:
    """`resolved_pins` with `forward` and `leave_out`; when a forward package's later release does not fit
    the rest of the date (maxminddb 2.5 requires a setuptools of 2023), it is left out instead, unless the
    recipe pins it (both sets are updated in place)."""
    try:
        return resolved_pins(task, env, progress, forward=forward, leave_out=leave_out)
    except EnvironmentUnsupported as exc:
        misfits = {n for n in forward - pinned_packages(env)
                   if re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w.-])", exc.reason, re.IGNORECASE)}
        if not misfits:
            raise
        progress(f"{task.id}: the first releases of {sorted(misfits)} with a wheel for Python {task.python} do not "
                 "resolve with the rest as of the date; leaving them out (optional test dependencies)")
        forward -= misfits
        leave_out |= misfits
        return resolved_pins(task, env, progress, forward=forward, leave_out=leave_out)


def _keep_pins_of_other_trees(task: Task, pins: Collection[str], requirements: Collection[str],
                              tree_own: Collection[str], progress: Progress) -> list[str]:
    """`requirements` without those that exclude a recipe's exact pin in the tree's own declarations (not
    its pre-install edits): the pin stays, and they leave the resolution.

    The lock of a version is made from one tree (its environment_setup_commit), and the official
    environment of the version holds the recipe's pins; each row's own `pip install -e .` then replaces a
    pin only where that row's tree excludes it. pytest 4.5 pins pluggy==0.11.0, its setup commit requires
    pluggy>=0.12 and its row 5103 accepts 0.11 (`pluggy>=0.9`): the environment keeps 0.11.0, and a row
    that needs another release gets it from the lock's row wheels (`row_wheels.py`). A pin that the
    recipe's own edits exclude (sphinx 3.x: Jinja2==3.0.3 against the `Jinja2<3.0` its sed writes) is
    excluded in every row, and `_yield_to_declarations` gives it way."""
    excluded = _excluding(task, pins, tree_own)
    for pin, against in excluded.items():
        progress(f"{task.id}: the recipe pins {pin}, which this tree's own requirement {against} excludes; the "
                 "version's environment keeps the pin as the official one does (a row whose tree excludes it "
                 "gets the release it needs from the lock's row wheels)")
    dropped = {requirement_name(pin) for pin in excluded}
    return [text for text in requirements if not _names_any(text, dropped)]


def _names_any(text: str, names: Collection[str]) -> bool:
    try:
        return requirement_name(Requirement(text).name) in names
    except (ValueError, TypeError):
        return False


def _excluding(task: Task, pins: Collection[str], requirements: Collection[str]) -> dict[str, Requirement]:
    """{exact pin: the first of `requirements` (whose marker holds for the task) that excludes it}."""
    target = {"python_version": task.python, "python_full_version": f"{task.python}.0", "sys_platform": "linux",
              "platform_system": "Linux", "os_name": "posix", "implementation_name": "cpython",
              "platform_python_implementation": "CPython", "extra": ""}
    ranges: dict[str, list[Requirement]] = {}
    for text in requirements:
        try:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(target):
                continue
        except (ValueError, TypeError):
            continue        # the resolver refuses it with a clear message; nothing to compare here
        if req.specifier:
            ranges.setdefault(requirement_name(req.name), []).append(req)
    found: dict[str, Requirement] = {}
    for pin in pins:
        if is_exact_pin(pin):
            version = pin.split("==", 1)[1].strip()
            against = [r for r in ranges.get(requirement_name(pin), [])
                       if not r.specifier.contains(version, prereleases=True)]
            if against:
                found[pin] = against[0]
    return found


def _yield_to_declarations(task: Task, pins: Collection[str], requirements: Collection[str],
                           progress: Progress) -> list[str]:
    """`pins` without the exact ones that the project's declarations (as its pre-install edits left
    them) exclude. The official harness installs the recipe's packages first and the project after, so
    pip replaces such a pin with a release the project accepts: sphinx 3.x's recipe pins Jinja2==3.0.3
    and edits setup.py to require Jinja2<3.0, and its tests run on Jinja2 2.11."""
    excluded = _excluding(task, pins, requirements)
    for pin, against in excluded.items():
        progress(f"{task.id}: the recipe pins {pin}, which the project's own requirement {against} "
                 "excludes; the project's install would replace it, so its requirement is resolved instead")
    return [pin for pin in pins if pin not in excluded]


def build_only_wheels(task: Task, env: Environment, pins: list[str], progress: Progress) -> list[str]:
    """Pins of the project's build requirements ([build-system].requires) resolved on their own, where they
    differ from `pins`: wheels the isolated build of `pip install` takes from the wheelhouse but the venv
    does not get (astropy builds against `oldest-supported-numpy`'s numpy 1.19.3 and runs on 1.25.2)."""
    requires = build_requires(task.repo_dir)
    if not requires:
        return []
    as_of = env.as_of or datetime.now(UTC).strftime("%Y-%m-%d")
    try:
        result = resolve(requires, task.python, as_of, progress=progress)
    except ResolveError as exc:
        progress(f"{task.id}: the build requirements {requires} do not resolve on their own ({exc.said or exc}); "
                 "the isolated build gets only the environment's wheels")
        return []
    if result.sdist_only:
        progress(f"{task.id}: build requirement(s) {[s.name for s in result.sdist_only]} have only sdists; the "
                 "isolated build gets only the environment's wheels for them")
    have = set(pins)
    return [p for p in result.pins if p not in have]


def pinned_packages(env: Environment) -> set[str]:
    """The packages the specification itself requires; any other one that never builds offline may be
    left out (an optional test dependency such as pywatchman; if the project needed it, its install or
    import check fails loudly)."""
    return {requirement_name(p) for p in env.pins}

"""Images of tasks whose environment is resolved rather than pinned by hand (`Task.environment`, the
SWE-bench rows): one environment image per (key, Python, resolution, recipe), shared, and a thin
instance image per task on top of it. The recipe's texts are in `venv.py`.

    ensure_instance_image(task, base)
      supported?          a recipe that cannot be followed offline -> EnvironmentUnsupported (the
                          base image, chosen by the caller with `system_packages`, holds the recipe's
                          Debian packages and, for compiled projects, a C toolchain)
      resolve             the project's declarations + build requirements + pins, as of the task's date
                          (uv, `resolve.py`), and the toolchain (pip, setuptools, wheel) of that era
      environment image   harness-env:venv-<hash of recipe, resolution, base>: wheels downloaded on the
                          host, sdists built in a network-less stage, a venv with everything installed
      instance image      harness-env:inst-<hash of env image, project files, install steps>: one layer
                          committed from a network-less build container (`instance.py`): project
                          installed, import checked, install products kept in /opt/harness/overlay

Both images carry `harness.base` (the sandbox image: `harness sandbox prune` removes them with it),
`harness.env.hash` and `harness.env.kind` ("environment" or "instance").
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import threading
import time
import tomllib
from collections.abc import Collection, Iterable
from datetime import UTC, datetime
from pathlib import Path

import docker
from packaging.requirements import Requirement

from harness import checks
from harness.core.sources import cache_dir
from harness.core.task import Environment, Task
from harness.environments.errors import EnvironmentBuildError, EnvironmentUnsupported, SdistsDidNotBuild
from harness.environments.instance import build_instance
from harness.environments.resolve import (
    ResolveError,
    SdistOnly,
    exclude_newer,
    is_exact_pin,
    read_declarations,
    resolve,
)
from harness.environments.venv import (
    BUILD_SDISTS,
    FAILED_SDISTS,
    IMPORT_FAILED,
    INSTALL_DEPS,
    INSTANCE_BUILD,
    LINK_SCRIPTS,
    MAKE_VENV,
    PROJECT_ARCHIVE,
    RECIPE_VERSION,
    TOOLCHAIN,
    TOOLCHAIN_FLOOR,
    VENV_LINK_MODULE,
    env_dockerfile,
    env_lines,
    label_line,
    venv_link_files,
)
from harness.environments.wheelhouse import WheelhouseError, download_sdist, pinned_wheelhouse
from sandbox.api import Progress, quiet
from sandbox.docker_sandbox import PROJECT_ARCHIVE_LABEL
from sandbox.errors import ImageError
from sandbox.images import BASE_LABEL, TOOLCHAIN_PACKAGES, build_context, image_exists

REPOSITORY = "harness-env"
HASH_LABEL = "harness.env.hash"
KIND_LABEL = "harness.env.kind"
KEY_LABEL = "harness.env.key"

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def tree_hash(root: Path) -> str:
    """A hash of the names and contents of the files under `root` (.git and __pycache__ left out)."""
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not {"__pycache__", ".git"} & set(p.parts)):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def ensure_instance_image(task: Task, base_image: str, *, client: docker.DockerClient,
                          progress: Progress = quiet, env_tag: str | None = None) -> str:
    """The tag of `task`'s instance image (its environment image built first if missing; `env_tag`: the
    one `ensure_environment_image` already gave for it).

    Raises:
        EnvironmentUnsupported: it cannot be built offline; the reason names what is missing.
        EnvironmentBuildError: the build failed (the project's install, the import check).
    """
    env_tag = env_tag or ensure_environment_image(task, base_image, client=client, progress=progress)
    assert task.environment is not None
    return _ensure_instance(task, task.environment, env_tag, base_image, client, progress)


def ensure_environment_image(task: Task, base_image: str, *, client: docker.DockerClient,
                             progress: Progress = quiet) -> str:
    """The tag of the environment image `task` shares with every task of its recipe, built if missing.

    Raises:
        EnvironmentUnsupported, EnvironmentBuildError: as `ensure_instance_image`.
    """
    env = task.environment
    if env is None:
        raise EnvironmentBuildError(f"task {task.id} has no resolved environment (Task.environment is None)")
    unsupported(task.id, env)
    forward: set[str] = set()
    leave_out: set[str] = set()
    pins, sdists, toolchain = resolved_pins(task, env, progress)
    known = {_name(s.name) for s in sdists} & failed_sdists(task.python)
    if known:          # they did not build before: take their first releases with a wheel straight away
        forward |= known
        pins, sdists, toolchain = _forward_or_leave_out(task, env, progress, forward, leave_out)
        # and those that have no release with a wheel at all (pywatchman on 3.11): left out straight away,
        # not built again for every instance to fail the same way
        still = ({_name(s.name) for s in sdists} & known) - pinned_packages(env)
        if still:
            forward -= still
            leave_out |= still
            progress(f"{task.id}: {sorted(still)} did not build offline before and have no release with a wheel "
                     f"for Python {task.python}; leaving them out (optional test dependencies)")
            pins, sdists, toolchain = _forward_or_leave_out(task, env, progress, forward, leave_out)
    for _ in range(3):
        try:
            return ensure_environment(task, env, base_image, pins, sdists, toolchain, client=client,
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
            pins, sdists, toolchain = _forward_or_leave_out(task, env, progress, forward, leave_out)
    raise EnvironmentUnsupported(task.id, f"source-only releases still do not build offline after taking later "
                                          f"releases of {sorted(forward)} and leaving out {sorted(leave_out)}")


def _forward_or_leave_out(task: Task, env: Environment, progress: Progress, forward: set[str],
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
    return {_name(p) for p in env.pins}


def failed_sdists(python: str) -> set[str]:
    """Project names whose source-only releases did not build offline for `python` before (remembered
    in the cache so that a later environment does not try again)."""
    try:
        data = json.loads((cache_dir() / "resolutions" / "failed-sdists.json").read_text())
        return {str(n) for n in data.get(python, [])}
    except (OSError, ValueError, AttributeError):
        return set()


def remember_failed_sdists(python: str, names: Iterable[str]) -> None:
    path = checks.private_dir(cache_dir() / "resolutions") / "failed-sdists.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data[python] = sorted(set(data.get(python, [])) | set(names))
    checks.write_file(path, json.dumps(data, indent=1) + "\n")


def unsupported(task_id: str, env: Environment) -> None:
    """Raise EnvironmentUnsupported when the recipe cannot be followed offline (`offline_blocker`)."""
    if env.offline_blocker:
        raise EnvironmentUnsupported(task_id, env.offline_blocker)


def system_packages(env: Environment | None) -> tuple[str, ...]:
    """The Debian packages the environment's base image needs beyond the sandbox image's: the recipe's
    own (`apt_packages`) and, for a project that compiles extensions, a C toolchain with Python's headers."""
    if env is None:
        return ()
    return tuple(sorted({*env.apt_packages, *(TOOLCHAIN_PACKAGES if env.compiled else ())}))


def resolved_pins(task: Task, env: Environment, progress: Progress, forward: Collection[str] = (),
                  leave_out: Collection[str] = ()) -> tuple[list[str], list[SdistOnly], list[str]]:
    """(the project's pins without the toolchain, its sdist-only pins, the toolchain pins).

    The toolchain is resolved as of the task's date or the interpreter's floor (`TOOLCHAIN_FLOOR`),
    whichever is later; an exact pin of pip, setuptools or wheel in `env.pins` replaces it. So are the
    packages `env.pins` names without a version (the recipe's test tools, which the official harness
    installs as of its image build): requests of 2012 is tested with a pytest that runs on Python 3.9.

    Raises:
        EnvironmentUnsupported: a resolution failed (uv's words in the reason).
    """
    as_of = env.as_of or datetime.now(UTC).strftime("%Y-%m-%d")
    if env.requirements:
        requirements = [*env.requirements, *build_requires(task.repo_dir)]
    else:
        declared = read_declarations(task.repo_dir, files=env.package_files, extras=env.extras,
                                     any_requirements_file=env.any_requirements_file, edits=env.pre_install)
        for item in declared.unreadable:
            progress(f"{task.id}: not read: {item.origin}: {item.reason}")
        requirements = [*declared.texts(), *build_requires(task.repo_dir)]
    pins = _yield_to_declarations(task, env.pins, requirements, progress)
    exact = {_name(p): p for p in pins if is_exact_pin(p)}
    ranges = [p for p in pins if _name(p) in TOOLCHAIN and _name(p) not in exact]
    try:
        cutoff = max(exclude_newer(as_of), exclude_newer(TOOLCHAIN_FLOOR.get(task.python, "2021-01-01")))
        tools = resolve(list(TOOLCHAIN), task.python, cutoff, pins=ranges, progress=progress).pins
        if not requirements and not pins:
            return [], [], sorted(exact.get(_name(p), p) for p in tools if _name(p) in TOOLCHAIN)
        given = [*pins]
        floor = TOOLCHAIN_FLOOR.get(task.python, "2021-01-01")
        wanted = [p for p in pins if _name(p) not in TOOLCHAIN and not Requirement(p).specifier]
        if wanted and exclude_newer(floor) > exclude_newer(as_of):
            # the recipe's test tools and their dependencies as of the floor, taken as exact pins
            ran = resolve(wanted, task.python, floor, pins=list(exact.values()), progress=progress).pins
            taken = [p for p in ran if _name(p) not in exact and _name(p) not in TOOLCHAIN]
            given = [p for p in pins if p not in wanted] + taken
        result = resolve(requirements, task.python, as_of, pins=given, forward=forward, leave_out=leave_out,
                         progress=progress)
    except ResolveError as exc:
        raise EnvironmentUnsupported(task.id, f"the dependencies do not resolve offline-ready: {exc}") from exc
    toolchain = sorted(exact.get(_name(p), p) for p in tools if _name(p) in TOOLCHAIN)
    chosen = {_name(p) for p in toolchain}
    sdist_names = {_name(s.name) for s in result.sdist_only}
    pins = [p for p in result.pins if _name(p) not in chosen and _name(p) not in sdist_names]
    return pins, list(result.sdist_only), toolchain


def _yield_to_declarations(task: Task, pins: Collection[str], requirements: Collection[str],
                           progress: Progress) -> list[str]:
    """`pins` without the exact ones that the project's own declarations (as its pre-install edits left
    them) exclude. The official harness installs the recipe's packages first and the project after, so
    pip replaces such a pin with a release the project accepts: sphinx 3.x's recipe pins Jinja2==3.0.3
    and edits setup.py to require Jinja2<3.0, and its tests run on Jinja2 2.11."""
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
            ranges.setdefault(_name(req.name), []).append(req)
    kept = []
    for pin in pins:
        if is_exact_pin(pin):
            version = pin.split("==", 1)[1].strip()
            against = [r for r in ranges.get(_name(pin), []) if not r.specifier.contains(version, prereleases=True)]
            if against:
                progress(f"{task.id}: the recipe pins {pin}, which the project's own requirement {against[0]} "
                         "excludes; the project's install would replace it, so its requirement is resolved instead")
                continue
        kept.append(pin)
    return kept


def build_requires(root: Path) -> list[str]:
    """pyproject.toml's [build-system] requires, read as text: the install runs offline, so the build's own
    requirements must be in the environment's wheelhouse (and in the venv for `--no-build-isolation`)."""
    path = root / "pyproject.toml"
    if not path.is_file() or path.is_symlink():
        return []
    try:
        data = tomllib.loads(path.read_text(errors="replace"))
    except tomllib.TOMLDecodeError:
        return []
    system = data.get("build-system")
    requires = system.get("requires", []) if isinstance(system, dict) else []
    return [r for r in requires if isinstance(r, str)] if isinstance(requires, list) else []


def _name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9._-]+)", requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else requirement


def ensure_environment(task: Task, env: Environment, base_image: str, pins: list[str], sdists: list[SdistOnly],
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
             "wheel-requirements.txt": "".join(p + "\n" for p in pins),
             "make-venv.sh": MAKE_VENV, "link-scripts.sh": LINK_SCRIPTS, "build-sdists.sh": BUILD_SDISTS,
             "install-deps.sh": INSTALL_DEPS}
    if build_wheels:   # only then: the images of environments without them keep their tags
        files["build-wheels.txt"] = "".join(p + "\n" for p in build_wheels)
    h = hashlib.sha256(json.dumps([RECIPE_VERSION, base_image, task.python, env.key, env_dockerfile(
        sdists=bool(sdists), labels={}), files, [(s.filename, s.sha256) for s in sdists]]).encode())
    digest = h.hexdigest()[:16]
    tag = f"{REPOSITORY}:venv-{digest}"
    labels = {HASH_LABEL: digest, BASE_LABEL: base_image, KIND_LABEL: "environment", KEY_LABEL: env.key}
    with _lock(digest):
        if image_exists(client, tag):
            return tag
        started = time.monotonic()
        progress(f"building environment {tag} ({env.key}, Python {task.python}): {len(pins)} wheel(s), "
                 f"{len(sdists)} sdist(s) to build, toolchain {' '.join(toolchain)}")
        with tempfile.TemporaryDirectory(prefix="harness-venv-") as tmp:
            ctx = Path(tmp)
            (ctx / "env").mkdir()
            (ctx / "sdists").mkdir()
            for name, text in files.items():
                (ctx / "env" / name).write_text(text)
            try:
                wheels = pinned_wheelhouse([*pins, *toolchain], task.python, progress)
                # apart: a name may be there twice (numpy for the build and for the venv), which one pip
                # download refuses
                extra = pinned_wheelhouse(build_wheels, task.python, progress) if build_wheels else None
                for sdist in sdists:
                    download_sdist(sdist.url, sdist.filename, sdist.sha256, ctx / "sdists", progress)
            except WheelhouseError as exc:
                raise EnvironmentUnsupported(task.id, f"the environment's files could not be downloaded: {exc}") \
                    from exc
            shutil.copytree(wheels, ctx / "env" / "wheels", ignore=shutil.ignore_patterns(".complete"))
            if extra is not None:
                shutil.copytree(extra, ctx / "env" / "wheels", ignore=shutil.ignore_patterns(".complete"),
                                dirs_exist_ok=True)
            (ctx / "Dockerfile").write_text(env_dockerfile(sdists=bool(sdists), labels=labels))
            try:
                build_context(client, ctx, tag, labels={}, progress=progress, buildargs={"BASE_IMAGE": base_image})
            except ImageError as exc:
                if FAILED_SDISTS in str(exc):
                    names = str(exc).split(FAILED_SDISTS, 1)[1].splitlines()[0].split()
                    packages = frozenset(_name(s.name) for s in sdists if s.filename in names)
                    raise SdistsDidNotBuild(task.id, f"sdist(s) {names} did not build into wheels offline "
                                                     f"(no C compiler in the image, or a build dependency "
                                                     f"missing): {exc}", packages) from exc
                raise EnvironmentBuildError(str(exc)) from exc
        progress(f"built {tag} in {time.monotonic() - started:.1f}s")
        return tag


def _ensure_instance(task: Task, env: Environment, env_tag: str, base_image: str, client: docker.DockerClient,
                     progress: Progress) -> str:
    env_vars = env_lines(env.test_env, task.id)      # validated (plain names, no newline in a value)
    version = str(task.extra.get("version", ""))
    settings = {"installed": bool(task.install_cmd),
                "scm_version": f"{version}.0" if re.fullmatch(r"\d+(\.\d+){0,2}", version) else "0.0.0"}
    scripts = {"build.py": INSTANCE_BUILD, "pre-install.sh": "".join(c + "\n" for c in env.pre_install),
               "install.sh": (task.install_cmd + "\n") if task.install_cmd else "",
               "settings.json": json.dumps(settings)}
    h = hashlib.sha256(json.dumps([RECIPE_VERSION, env_tag, env_vars, scripts, VENV_LINK_MODULE]).encode())
    h.update(tree_hash(task.repo_dir).encode())
    digest = h.hexdigest()[:16]
    tag = f"{REPOSITORY}:inst-{digest}"
    labels = {HASH_LABEL: digest, BASE_LABEL: base_image, KIND_LABEL: "instance", KEY_LABEL: env.key,
              PROJECT_ARCHIVE_LABEL: PROJECT_ARCHIVE}
    label_line(labels)       # refuses a value with a newline or NUL, as the environment image's LABEL does
    with _lock(digest):
        if image_exists(client, tag):
            return tag
        started = time.monotonic()
        progress(f"building instance {tag} for {task.id} on {env_tag}")
        try:
            output = build_instance(client, env_tag, tag, task.repo_dir, scripts, dict(env.test_env), labels,
                                    system_files=venv_link_files(task.python))
        except EnvironmentBuildError as exc:
            raise _on_another_interpreter(task, env, exc) from exc
        for line in output.splitlines()[-5:]:
            progress(f"{task.id}: {line}")
        progress(f"built {tag} in {time.monotonic() - started:.1f}s")
        return tag


def _on_another_interpreter(task: Task, env: Environment, exc: EnvironmentBuildError) -> EnvironmentBuildError:
    """`exc`, or, when the project installed but does not import on the interpreter that stands in for the
    one its recipe asks (scikit-learn 0.20's vendored cloudpickle on 3.9 for 3.6) with an error that is
    not a missing module, EnvironmentUnsupported: the project does not support the interpreter available
    offline. A missing module stays a build error (a dependency the environment should have had)."""
    text = str(exc)
    if IMPORT_FAILED not in text or env.python_requested == task.python:
        return exc
    lines = [line.strip() for line in text.split(IMPORT_FAILED)[0].splitlines() if line.strip()]
    error = next((line for line in reversed(lines) if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Warning)\b", line)),
                 None)
    if error is None or error.startswith(("ModuleNotFoundError", "ImportError")):
        return exc
    where = next((line for line in reversed(lines) if line.startswith('File "/workspace/')), "")
    return EnvironmentUnsupported(task.id, f"the project does not import on Python {task.python}, the nearest "
                                           f"interpreter available offline to the {env.python_requested} its recipe "
                                           f"asks: {error}" + (f" ({where})" if where else ""))


def _lock(digest: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(digest, threading.Lock())

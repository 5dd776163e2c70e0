"""The instance build: runs in the network-less build container with the venv's Python (3.9 and up: no
newer syntax). It unpacks the project into /workspace, snapshots it, runs pre-install.sh and install.sh
there, checks the imports from /, and copies what the install added or changed to the overlay.

Shipped into the container as /opt/harness/instance/build.py by `harness.environments.instance_image`;
its paths and markers are `harness.environments.recipe`'s (tests/evaluation/test_container_scripts.py
holds them equal).
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
from typing import IO, Any, Union

WORK, HERE, OVERLAY = "/workspace", "/opt/harness/instance", "/opt/harness/overlay"
PROJECT = "/opt/harness/project/workspace.tar"
WHEELS = "/opt/harness/env/wheels"
VENV_BIN = "/opt/harness/venv/bin"
INSTALL_FAILED = "harness: the project's install failed"
IMPORT_FAILED = "harness: the project does not import:"
SKIP = {".git", "__pycache__"}
SDIST_SUFFIXES = (".tar.gz", ".tar.bz2", ".zip")
NOT_PACKAGES = {"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "scripts", "tools", "bin"}

Identity = Union[str, tuple[int, int, int, int, int]]


def snapshot() -> dict[str, Identity]:
    # what identifies a file's content here: a write changes its ctime (which no process sets back), a
    # replacement its inode; reading every file to hash it cost a second a pass on a django-sized tree
    files: dict[str, Identity] = {}
    for top, dirs, names in os.walk(WORK):
        dirs[:] = [d for d in dirs if d not in SKIP]
        for name in names:
            path = os.path.join(top, name)
            if os.path.islink(path):
                files[path] = "link:" + os.readlink(path)
            elif os.path.isfile(path):
                st = os.lstat(path)
                files[path] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)
    return files


def run(script: str, log: IO[str]) -> bool:
    if not os.path.getsize(script):
        return True
    return subprocess.call(["bash", "-e", script], cwd=WORK, stdout=log, stderr=subprocess.STDOUT) == 0


def top_level_names(project: str = "") -> list[str]:
    """The project's top-level packages: those its egg-info lists, else the package folders of its source
    tree (only src/'s in a src layout: folders beside src/, such as an invoke `tasks` package, are not
    installed); the one named after the distribution (`project`, normalised), when there is one."""
    names: list[str] = []
    own: list[str] = []
    for base in (WORK, os.path.join(WORK, "src")):
        for entry in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            top = os.path.join(base, entry, "top_level.txt")
            if entry.endswith(".egg-info") and os.path.isfile(top):
                with open(top) as handle:
                    listed = [n.strip() for n in handle.read().split() if n.strip()]
                names += listed
                # the distribution's own package, when listed, is the one to import: others may be shims
                # that raise ImportError on purpose (pydicom 1.x's `dicom`)
                own += [n for n in listed if n.lower() == entry[:-len(".egg-info")].lower().replace("-", "_")]
    if own:
        return sorted(set(own))
    if names:
        return sorted({n for n in names if n.isidentifier()})
    for base in (os.path.join(WORK, "src"), WORK):
        for entry in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            if entry not in NOT_PACKAGES and entry.isidentifier() \
                    and os.path.isfile(os.path.join(base, entry, "__init__.py")):
                names.append(entry)
        if names:
            break
    named = project.replace("-", "_")
    return [named] if named in names else names


def link_scripts() -> None:
    """Link the venv's new scripts (the project's console scripts: django-admin, pylint) into
    /usr/local/bin, first on the sandbox's PATH. Not link-scripts.sh: as the build's user it stopped at
    the root-owned link of the venv's __pycache__ folder, before any script."""
    for name in sorted(os.listdir(VENV_BIN)):
        script, link = os.path.join(VENV_BIN, name), os.path.join("/usr/local/bin", name)
        if name.startswith(("python", "activate", "Activate")) or not os.path.isfile(script):
            continue
        if os.path.lexists(link):
            if not os.path.islink(link) or os.readlink(link) == script:
                continue      # a wrapper of ours, or linked already
            os.remove(link)
        os.symlink(script, link)


SPENT: list[str] = []


def spent(what: str, since: float) -> float:
    SPENT.append(f"{what} {time.monotonic() - since:.1f}s")
    return time.monotonic()


def _pyproject(path: str) -> dict[str, Any] | None:
    """pyproject.toml's content, read with the TOML parser at hand: the venv's Python may predate tomllib,
    then pip's vendored tomli (pip 21.2 on) or toml (before); None when none can read it."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    for module in ("tomllib", "pip._vendor.tomli", "pip._vendor.toml"):
        try:
            reader = importlib.import_module(module)
        except ImportError:
            continue
        try:
            return dict(reader.loads(raw.decode("utf-8")))
        except (ValueError, TypeError, IndexError, UnicodeDecodeError):   # each parser's own error derives from one
            return None
    return None


def _wheelhouse_versions() -> dict[str, list[str]]:
    """Each distribution of the wheelhouse (normalised name) -> the versions it has files of."""
    found: dict[str, list[str]] = {}
    for name in os.listdir(WHEELS) if os.path.isdir(WHEELS) else []:
        if name.endswith(".whl"):
            dist, _, rest = name.partition("-")
            version = rest.partition("-")[0]
        elif name.endswith(SDIST_SUFFIXES):
            stem = next(name[:-len(s)] for s in SDIST_SUFFIXES if name.endswith(s))
            dist, _, version = stem.rpartition("-")
        else:
            continue
        found.setdefault(re.sub(r"[-_.]+", "-", dist).lower(), []).append(version)
    return found


def isolation_differs() -> str | None:
    """Why pip's isolated build environment would differ from the venv (None: it would not).

    pip builds a project that has a pyproject.toml in a fresh environment holding its build requirements,
    each at the newest version the wheelhouse has that satisfies it (the install is offline, from
    WHEELS). When the venv already holds every one of them, and every requirement of theirs, at exactly
    that version, the build sees the same packages either way, and `--no-build-isolation` saves the
    isolated environment's install (django 4.1: 19.3 s of its 25 s install under load, 9.9 s without).
    Anything not known for sure (no pyproject.toml parser, a requirement not installed, a version the
    wheelhouse does not have, a newer one there) keeps the isolation, as the recipe asks."""
    try:
        from pip._vendor.packaging.requirements import InvalidRequirement, Requirement  # noqa: PLC0415
        from pip._vendor.packaging.version import InvalidVersion, Version  # noqa: PLC0415
    except ImportError:
        return "the venv's pip (and its packaging) is not importable"

    path = os.path.join(WORK, "pyproject.toml")
    if not os.path.isfile(path):
        return "no pyproject.toml: pip does not isolate this build"
    data = _pyproject(path)
    if data is None:
        return "pyproject.toml could not be read here"
    system = data.get("build-system") or {}
    wanted = list(system.get("requires") or ["setuptools>=40.8.0", "wheel"])
    if str(system.get("build-backend") or "setuptools.build_meta").startswith("setuptools"):
        wanted.append("wheel")      # setuptools' backend asks for it for a wheel (before setuptools 70.1)
    available = _wheelhouse_versions()
    seen: set[str] = set()
    while wanted:
        text = wanted.pop()
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            return f"the build requirement {text!r} does not parse"
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        try:
            installed = Version(metadata.version(name))
            best = max((v for v in (Version(x) for x in available.get(name, []))
                        if requirement.specifier.contains(v, prereleases=bool(requirement.specifier.prereleases))),
                       default=None)
        except metadata.PackageNotFoundError:
            return f"{name} is a build requirement the venv does not hold"
        except InvalidVersion as exc:
            return f"{name}: a version does not parse ({exc})"
        if best is None or best != installed:
            return f"{name}: the venv holds {installed}, the isolated build would take {best or 'none'}"
        if name not in seen:
            seen.add(name)
            wanted += metadata.requires(name) or []      # their extras' requirements: the marker leaves out
    return _seen_by_the_build(seen)


# What a build in the venv sees beyond its build requirements, and the isolated build does not (setuptools 68's
# own code): the plugins it loads from every installed distribution's entry points, and a module it imports
# only when it is installed. Plugins it always runs: setuptools-scm's version hook and file finder, pbr's
# egg-info writer, hatch's and pdm's plugins. A setup keyword's handler runs when the project's setup passes
# that keyword (cffi's `cffi_modules`: django's venvs hold cffi, and django passes no such keyword); a
# command class when pip's build runs that command. On Python < 3.10 setuptools imports `importlib_metadata`
# when installed, to disable its finder (0.17 breaks the build on 3.9: pytest-5103).
ALWAYS_RUN_GROUPS = ("setuptools.finalize_distribution_options", "setuptools.file_finders", "egg_info.writers",
                     "setuptools.installation", "hatch", "pdm", "poetry.plugin", "flit")
BUILD_COMMANDS = {"egg_info", "dist_info", "bdist_wheel", "build", "build_py", "build_ext", "build_clib",
                  "build_scripts", "develop", "editable_wheel", "install", "install_lib", "install_scripts",
                  "install_egg_info", "install_data", "install_headers", "sdist"}
IMPORTED_WHEN_INSTALLED = {"importlib-metadata": (3, 10)}      # {distribution: from which Python it is not}


def _project_setup_text() -> str:
    parts = []
    for name in ("setup.py", "setup.cfg", "pyproject.toml"):
        try:
            with open(os.path.join(WORK, name), errors="replace") as file:
                parts.append(file.read())
        except OSError:
            continue
    return "\n".join(parts)


def _seen_by_the_build(closure: set[str], python: tuple[int, int] = sys.version_info[:2]) -> str | None:
    """Why a distribution the venv holds outside the build requirements' `closure` would change the build on
    `python` (None: none would)."""
    setup_text: str | None = None
    for dist in metadata.distributions():
        name = re.sub(r"[-_.]+", "-", str(dist.metadata["Name"] or "")).lower()
        if not name or name in closure or name == "pip":
            continue
        if name in IMPORTED_WHEN_INSTALLED and python < IMPORTED_WHEN_INSTALLED[name]:
            return f"{name} {dist.version} is in the venv, and the build imports it when it is installed"
        for ep in dist.entry_points:
            if ep.group.startswith(ALWAYS_RUN_GROUPS):
                used = True
            elif ep.group == "distutils.commands":
                used = ep.name in BUILD_COMMANDS
            elif ep.group == "distutils.setup_keywords":
                setup_text = _project_setup_text() if setup_text is None else setup_text
                used = re.search(rf"(?<![\w.-]){re.escape(ep.name)}(?![\w.-])", setup_text) is not None
            else:
                used = False
            if used:
                return f"{name} {dist.version} is in the venv and plugs into the build ({ep.group}: {ep.name})"
    return None


def install(settings: dict[str, object]) -> bool:
    """Run pre-install.sh and install.sh offline; print the log's tail."""
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_FIND_LINKS=WHEELS, PIP_NO_CACHE_DIR="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    if not os.path.isdir(os.path.join(WORK, ".git")):
        env.setdefault("SETUPTOOLS_SCM_PRETEND_VERSION", str(settings["scm_version"]))
    os.environ.update(env)
    with open("/tmp/install.log", "w") as log:
        ok = run(os.path.join(HERE, "pre-install.sh"), log)     # it may edit pyproject.toml: read after it
        differs = ("kept, as asked" if settings.get("keep_build_isolation") else isolation_differs()) if ok \
            else "the pre-install step failed"
        if differs is None:       # pip's double negative: PIP_NO_BUILD_ISOLATION=0 is --no-build-isolation
            os.environ["PIP_NO_BUILD_ISOLATION"] = "0"
        ok = ok and run(os.path.join(HERE, "install.sh"), log)
    print("build isolation: " + ("off (the venv holds every build requirement at the version the isolated build "
                                 "would install)" if differs is None else f"as the recipe says ({differs})"))
    with open("/tmp/install.log", errors="replace") as log_text:
        tail = log_text.read().splitlines()[-40:]
    print("\n".join(tail))
    return ok


def imports_ok(where: str, project: str) -> bool:
    """Whether each of the project's top-level packages imports from `where`; prints which."""
    for name in top_level_names(project):
        check = subprocess.run([sys.executable, "-c", "import " + name], cwd=where,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if check.returncode != 0:
            print(check.stdout[-3000:])
            print(IMPORT_FAILED + " " + name + " (from " + where + ")")
            return False
        print("imports: " + name)
    return True


def save_overlay(before: dict[str, Identity], after: dict[str, Identity]) -> None:
    changed = sorted(p for p, h in after.items() if before.get(p) != h)
    for path in changed:
        dest = OVERLAY + path[len(WORK):]
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy2(path, dest, follow_symlinks=False)
    os.makedirs(OVERLAY, exist_ok=True)
    print(f"overlay: {len(changed)} file(s) added or changed by the install")


def main() -> int:
    t = time.monotonic()
    subprocess.check_call(["tar", "-x", "--no-same-owner", "-p", "-f", PROJECT, "-C", WORK])
    with open(os.path.join(HERE, "settings.json")) as handle:
        settings = json.load(handle)
    t = spent("unpack", t)
    before = snapshot()
    t = spent("snapshot", t)
    ok = install(settings)
    t = spent("install", t)
    if not ok:
        print(INSTALL_FAILED)
        return 1
    link_scripts()
    if not imports_ok("/" if settings["installed"] else WORK, str(settings.get("project") or "")):
        return 1
    t = spent("import check", t)
    after = snapshot()
    t = spent("snapshot", t)
    save_overlay(before, after)
    spent("overlay", t)
    print("time: " + ", ".join(SPENT))
    return 0


if __name__ == "__main__":
    sys.exit(main())

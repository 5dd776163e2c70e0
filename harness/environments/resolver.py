"""Exact pins for a Linux CPython 3.9/3.11/3.13 as of a date, from `uv pip compile --exclude-newer`,
cached under cache_dir()/resolutions by their inputs.

    resolve(reqs, python, as_of)   the pins (a `Resolution`), or a ResolveError with uv's own words
    resolve_tree(root, ...)        `declarations.read_declarations(root)` and their resolution

No package code runs on the host: uv runs with `--no-build`, so it reads the metadata of wheels only.
A release that has no wheel for the target (an sdist only, e.g. MarkupSafe 1.1.1 for Python 3.9) would
make the resolution fail; when uv names such a package, its newest source-only releases before the
date are downloaded (never unpacked, never built), their declared dependencies read (`sdists.py`),
and uv is run again with a stand-in wheel holding only that metadata. Those pins come back in
`Resolution.sdist_only`: they must be built into wheels in a network-less container before they can
be installed. The project itself, when its tree declares its version (`own_version.py`), is resolved at
that release as a stand-in (`resolve(project=...)`): a dependency requiring another release of it is not
chosen, and it is never among the pins.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict
from datetime import date, datetime
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from harness import checks
from harness.core.sources import cache_dir
from harness.environments.declarations import Declarations, read_declarations
from harness.environments.index import INDEX_URL, file_version, index_files, newest_exact_pin, target_tags
from harness.environments.own_version import tree_version
from harness.environments.resolution import Resolution, ResolveError, SdistOnly, exclude_newer, is_exact_pin, split_pin
from harness.environments.sdists import read_sdist, write_metadata_wheel, write_standin
from harness.environments.wheelhouse import GLIBC_MINOR
from harness.errors import TaskError
from sandbox.api import Progress, quiet

CACHE_VERSION = "4"        # bump when the cached result's meaning changes (4: exact pins get stand-ins)
PIN_CUTOFF = "2100-01-01T00:00:00Z"   # the per-package cutoff of an exact pin: any upload date
UV_MAX_GLIBC = 40          # the newest manylinux_2_N that uv's --python-platform names
MAX_ROUNDS = 40            # uv runs; each names one or two source-only packages to stand in for
STANDINS_PER_NAMING = 3    # source-only releases of a package given a stand-in each time uv names it
STANDINS_PER_PACKAGE = 9   # at most, newest first
OWN_LABEL = "tree"         # the local version label of the project's own stand-in: 4.0.3+tree
Runner = Callable[[list[str], str, Path], subprocess.CompletedProcess[str]]


def resolve_tree(root: Path, python: str, as_of: datetime | date | str, *, pins: Sequence[str] = (),
                 extras: Collection[str] = (), files: Sequence[str] = (),
                 progress: Progress = quiet) -> tuple[Declarations, Resolution]:
    """`read_declarations(root)` and their `resolve` with `pins`, the project at its tree's release.

    Raises:
        ResolveError: see `resolve`.
    """
    declared = read_declarations(root, extras=extras, files=files)
    own = tree_version(root)
    return declared, resolve(declared.texts(), python, as_of, pins=pins, project=own.pin() if own else "",
                             progress=progress)


def resolve(requirements: Sequence[str], python: str, as_of: datetime | date | str, *,
            pins: Sequence[str] = (), forward: Collection[str] = (), leave_out: Collection[str] = (),
            project: str = "", runner: Runner | None = None,
            index_url: str = INDEX_URL, cache: Path | None = None, progress: Progress = quiet) -> Resolution:
    """Exact pins for `requirements` plus `pins` (which override any other range for their package) on a
    Linux CPython `python`, from releases uploaded before `as_of` (a date means the end of that UTC day).
    An exact pin (``name==1.2``) is taken whatever its date: a specification may pin a release newer
    than the instance. An exact pin with no wheel for the target whose release series (1.2.x) has a later
    release with one takes the first such release instead (``numpy==1.19.2`` on Python 3.9 -> 1.19.3:
    a pin made for an older interpreter); without one, its sdist is built. A package of `forward` that
    has no wheel for the target before `as_of` takes its first release that has one (uploaded later)
    instead of a source-only stand-in: for sdists that do not build offline (C extensions: numpy,
    Pillow, cffi of before the interpreter existed). A package of `leave_out` is not installed at all,
    whoever requires it (for optional test dependencies that never had a wheel for the target and do
    not build offline).
    `project` is the project itself as ``name==release`` (`own_version.TreeVersion.pin`): installed from
    its tree, never locked, but a dependency may require it (sphinxcontrib-applehelp 1.0.7 requires
    Sphinx>=5). It is resolved as a stand-in holding no dependencies (its declarations are among
    `requirements`) at ``release+tree``, which no index has, so a dependency that requires another release
    of the project is not chosen, as pip would not choose it with the project installed; it is never
    among the pins.
    When nothing resolves as of `as_of` and an exact pin is newer, the resolution is made as of the
    newest exact pin's release instead (its `exclude_newer` says so): its dependencies may be newer than the date.
    The same inputs give the result cached under `cache` (default cache_dir()/resolutions) without uv; so
    does uv's "No solution found" (never a network failure).

    Raises:
        ResolveError: a requirement, the Python or the date is refused, or uv found no resolution (its
            own words are in the message and in `said`).
    """
    reqs = _valid(requirements, "requirements")
    given = _valid(pins, "pins")
    if project and not is_exact_pin(project):
        raise ResolveError(f"project {project!r} is not the project's own name==release; expected e.g. "
                           "\"sphinx==4.0.3\"")
    if python not in GLIBC_MINOR:
        raise ResolveError(f"Python {python!r} has no target here; expected one of {sorted(GLIBC_MINOR)}, e.g. \"3.9\"")
    cutoff = exclude_newer(as_of)
    plat = f"{platform.machine()}-manylinux_2_{min(GLIBC_MINOR[python], UV_MAX_GLIBC)}"
    ahead = sorted({canonicalize_name(n) for n in forward})
    dropped = sorted({canonicalize_name(n) for n in leave_out})
    key = hashlib.sha256(json.dumps([CACHE_VERSION, sorted(reqs), sorted(given), python, plat, cutoff, index_url,
                                     ahead, dropped, project]).encode()).hexdigest()[:24]
    path = checks.private_dir(cache if cache is not None else cache_dir() / "resolutions") / f"{key}.json"
    hit = _load(path)
    if hit is not None:
        return hit
    failed = path.with_suffix(".failed.json")
    _raise_cached_failure(failed)
    progress(f"resolving {len(reqs) + len(given)} requirement(s) for Python {python} as of {cutoff} with uv")

    def resolver(as_of: str) -> _Resolver:
        return _Resolver(reqs, given, python, plat, as_of, index_url, runner or run_uv, progress, ahead, dropped,
                         project)

    try:
        result = _run_or_as_of_newest_pin(resolver, cutoff, reqs + given, index_url, progress)
    except ResolveError as exc:
        if _NO_SOLUTION in exc.said:       # uv's verdict on these inputs, not a network or input problem
            checks.write_file(failed, json.dumps({"message": str(exc), "said": exc.said}, indent=1) + "\n")
        raise
    checks.write_file(path, json.dumps(asdict(result), indent=1) + "\n")
    return result


_NO_SOLUTION = "No solution found"


def _run_or_as_of_newest_pin(resolver: Callable[[str], _Resolver], cutoff: str, requirements: list[str],
                             index_url: str, progress: Progress) -> Resolution:
    """The resolution as of `cutoff`; when nothing resolves then and an exact pin of `requirements` is
    newer, the resolution as of the newest exact pin's release instead.

    Raises:
        ResolveError: neither resolved.
    """
    try:
        return resolver(cutoff).run()
    except ResolveError:
        # the recipe pins releases newer than the date (xarray's dask 2022.8.1 for a 2019 instance), whose
        # own dependencies are newer still: the environment cannot be older than the newest release it holds
        newest = newest_exact_pin(requirements, index_url)
        if newest is None or newest <= cutoff:
            raise
        progress(f"resolve: nothing resolves as of {cutoff[:10]} with the exact pins, the newest of which was "
                 f"released {newest[:10]}; resolving as of then")
        return resolver(newest).run()


def _raise_cached_failure(path: Path) -> None:
    """Raise the ResolveError recorded for the same inputs: a resolution uv found impossible stays
    impossible (a failed attempt of the fallbacks is asked again for every instance of an environment)."""
    try:
        data = json.loads(path.read_text())
        message, said = str(data["message"]), str(data["said"])
    except (OSError, ValueError, TypeError, KeyError):
        return
    raise ResolveError(message, said)


def run_uv(cmd: list[str], stdin: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run uv (the resolver) with `stdin`; the default runner of `resolve`. uv's own environment variables
    are dropped (an extra index or another date there would change a result cached without them), except
    where uv keeps its cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_") or k == "UV_CACHE_DIR"}
    return subprocess.run(cmd, input=stdin, cwd=cwd, capture_output=True, text=True, timeout=900, check=False,
                          env={**env, "UV_PYTHON_DOWNLOADS": "never", "NO_COLOR": "1"})


def uv_binary() -> str:
    """The uv executable: beside this interpreter (pip install uv), else on PATH."""
    here = Path(sys.executable).parent / "uv"
    found = str(here) if here.is_file() else shutil.which("uv")
    if found is None:
        raise ResolveError(f"uv (the resolver) is not installed beside {sys.executable} nor on PATH; "
                           f"install it with `{sys.executable} -m pip install uv`")
    return found


def _valid(requirements: Sequence[str], where: str) -> list[str]:
    try:
        return sorted({checks.requirement(r, where, pinned=False) for r in requirements})
    except TaskError as exc:
        raise ResolveError(str(exc)) from exc


def _load(path: Path) -> Resolution | None:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        data["sdist_only"] = tuple(SdistOnly(**s) for s in data["sdist_only"])
        tuples = ("pins", "requirements", "given_pins", "command")
        return Resolution(**{**data, **{k: tuple(data[k]) for k in tuples}, "from_cache": True})
    except (OSError, ValueError, TypeError, KeyError):
        return None


class _Resolver:
    """uv runs until it resolves, each adding stand-in wheels for the source-only packages it named."""

    def __init__(self, reqs: list[str], given: list[str], python: str, plat: str, cutoff: str,
                 index_url: str, runner: Runner, progress: Progress, forward: Collection[str] = (),
                 leave_out: Collection[str] = (), project: str = "") -> None:
        self.reqs, self.given, self.python, self.plat = reqs, given, python, plat
        self.project = project
        self.cutoff, self.index_url, self.runner, self.progress = cutoff, index_url, runner, progress
        self.forward = set(forward)
        self.leave_out = sorted(leave_out)
        # per-package cutoffs: exact pins whatever their date, forward packages up to their first wheel
        self.later: dict[str, str] = {split_pin(p)[0]: PIN_CUTOFF for p in [*reqs, *given]
                                      if is_exact_pin(p)}
        self.standins: dict[tuple[str, str], SdistOnly] = {}
        self.offered: dict[str, list[tuple[Version, dict[str, Any]]]] = {}   # name: its source-only releases
        self.tags = target_tags(python)

    def command(self, work: Path) -> list[str]:
        return [uv_binary(), "pip", "compile", "-", "--no-config", "--no-build", "--no-python-downloads",
                "--exclude-newer", self.cutoff, "--python-version", self.python, "--python-platform", self.plat,
                "--index-url", self.index_url, "--find-links", str(work / "standins"),
                "--overrides", str(work / "overrides.txt"), "--no-header", "--no-annotate", "--color", "never",
                *[arg for name in sorted(self.later) for arg in ("--exclude-newer-package",
                                                                  f"{name}={self.later[name]}")]]

    def run(self) -> Resolution:
        with tempfile.TemporaryDirectory(prefix="harness-resolve-") as tmp:
            work = Path(tmp)
            (work / "standins").mkdir()
            self.given = [self.nearest_with_wheel(pin) for pin in self.given]
            # an override whose marker never holds removes the package from every requirer (uv's overrides)
            never = [f"{name} ; python_version < '0'" for name in self.leave_out]
            (work / "overrides.txt").write_text("".join(p + "\n" for p in [*self.given, *never]))
            own = self.own_standin(work / "standins")
            for _ in range(MAX_ROUNDS):
                cmd = self.command(work)
                wanted = [r for r in [*self.reqs, *self.given, *own]
                          if canonicalize_name(Requirement(r).name) not in self.leave_out]
                proc = self.runner(cmd, "".join(r + "\n" for r in wanted), work)
                if proc.returncode == 0:
                    return self.result(proc.stdout, [c.replace(str(work), "$WORK") for c in cmd])
                named = sorted(set(re.findall(r"Wheels are required for `([^`]+)`", proc.stderr)))
                ahead = [name for name in named if self.take_first_wheel(name)]
                added = [s for name in named if name not in ahead for s in self.next_standins(name)]
                if not added and not ahead:
                    raise self.failure(proc.stderr)
                for sdist, requires, python_req in added:
                    write_standin(work / "standins", sdist, requires, python_req)
                    self.standins[(canonicalize_name(sdist.name), sdist.version)] = sdist
        raise self.failure(proc.stderr)

    def own_standin(self, folder: Path) -> list[str]:
        """The requirement of the project itself at its tree's release, whose stand-in is written to
        `folder`; none without a project."""
        if not self.project:
            return []
        name, release = split_pin(self.project)
        write_metadata_wheel(folder, name, f"{release}+{OWN_LABEL}")
        return [f"{name}=={release}+{OWN_LABEL}"]

    def result(self, stdout: str, cmd: list[str]) -> Resolution:
        own = split_pin(self.project)[0] if self.project else None
        pins = sorted({line.strip() for line in stdout.splitlines() if "==" in line and not line.startswith("#")
                       and split_pin(line.strip())[0] != own})
        pinned = {tuple(split_pin(p)) for p in pins}
        chosen = [self.standins[k] for k in sorted(self.standins) if k in pinned]
        return Resolution(tuple(pins), tuple(chosen), tuple(self.reqs), tuple(self.given), self.python, self.plat,
                          self.cutoff, tuple(cmd), self.project)

    def failure(self, stderr: str) -> ResolveError:
        said = "\n".join(line for line in stderr.strip().splitlines() if not line.startswith("warning:"))
        own = f" with the project itself at {self.project} (its tree's release)" if self.project else ""
        return ResolveError(
            f"uv found no versions of {self.reqs + self.given} for Python {self.python} ({self.plat}){own} among "
            f"releases uploaded before {self.cutoff} that have a wheel or a readable sdist; it said:\n{said}\n"
            "Expected a resolvable set: pin the package uv names to a version of that time, or move the date", said)

    def nearest_with_wheel(self, pin: str) -> str:
        """`pin`, or for an exact pin whose release has no wheel for the target, the first later release of
        the same series (major.minor) that has one."""
        if not is_exact_pin(pin):
            return pin
        name, version = split_pin(pin)
        try:
            wanted = Version(version)
        except InvalidVersion:
            return pin
        wheels: set[Version] = set()
        for f in index_files(self.index_url, name):
            v = file_version(str(f.get("filename", "")))
            if v is not None and not f.get("yanked") and self._usable_wheel(str(f["filename"])):
                wheels.add(v)
        if wanted in wheels:
            return pin
        later = sorted(v for v in wheels if v > wanted and not v.is_prerelease and v.release[:2] == wanted.release[:2])
        if not later:
            return pin
        self.progress(f"resolve: {pin.strip()} has no wheel for Python {self.python} ({self.plat}); taking "
                      f"{name}=={later[0]}, the first release of its series with one")
        return f"{name}=={later[0]}"

    def take_first_wheel(self, name: str) -> bool:
        """For a `forward` package: let uv see its releases up to the day of its first one with a wheel
        for the target; False when it is not forward, already moved, or never had such a wheel."""
        key = canonicalize_name(name)
        if key not in self.forward or key in self.later:
            return False
        dated = [(v, str(f.get("upload-time", ""))) for f in index_files(self.index_url, name)
                 if not f.get("yanked") and self._usable_wheel(str(f.get("filename", "")))
                 and (v := file_version(str(f["filename"]))) is not None and not v.is_prerelease]
        if not dated or not min(dated)[1][:10]:
            return False
        version, uploaded = min(dated)
        self.later[key] = exclude_newer(uploaded[:10])
        self.progress(f"resolve: {name} has no wheel for Python {self.python} before {self.cutoff[:10]}; taking "
                      f"its first release with one, {version} ({uploaded[:10]})")
        return True

    def next_standins(self, name: str) -> list[tuple[SdistOnly, list[str], str]]:
        """The next STANDINS_PER_NAMING of `name`'s source-only releases (newest first, up to
        STANDINS_PER_PACKAGE in all) without a stand-in yet, each with its declared dependencies."""
        if name not in self.offered:
            self.offered[name] = self.sdist_releases(name)
        done = sum(1 for key in self.standins if key[0] == canonicalize_name(name))
        batch = self.offered[name][done:min(done + STANDINS_PER_NAMING, STANDINS_PER_PACKAGE)]
        if batch:
            self.progress(f"resolve: {name} {', '.join(str(v) for v, _ in batch)} have no wheel for Python "
                          f"{self.python} ({self.plat}); reading their sdists' declared dependencies")
        return [read_sdist(name, str(version), sdist) for version, sdist in batch]

    def sdist_releases(self, name: str) -> list[tuple[Version, dict[str, Any]]]:
        """The releases of `name` before the date, newer than its newest release with a wheel for the
        target, that have an sdist (newest first), each with its sdist's index entry; for a name pinned
        exactly, only the pinned release (pytest-astropy==0.2.1 for astropy 1.3: its later releases have
        wheels, and would hide it)."""
        by_version: dict[Version, list[dict[str, Any]]] = {}
        for f in index_files(self.index_url, name):
            version = file_version(str(f.get("filename", "")))
            if version is not None and not version.is_prerelease and not f.get("yanked") and self._before(f, name) \
                    and self._python_ok(f):
                by_version.setdefault(version, []).append(f)
        found = []
        pinned = self._exact_pins().get(canonicalize_name(name))
        for version in sorted(by_version, reverse=True):
            if pinned is not None and str(version) != pinned:
                continue        # uv needs the pinned release only, whatever later releases have wheels
            if any(self._usable_wheel(str(f["filename"])) for f in by_version[version]):
                break
            sdist = next((f for f in by_version[version] if file_version(str(f["filename"]), sdist=True)), None)
            if sdist is not None:
                found.append((version, sdist))
        return found

    def _exact_pins(self) -> dict[str, str]:
        """{name: version} of the exact pins asked (as given: a version normalised as packaging does)."""
        pins = {}
        for pin in (p for p in [*self.reqs, *self.given] if is_exact_pin(p)):
            name, version = split_pin(pin)
            try:
                pins[name] = str(Version(version))
            except InvalidVersion:
                continue
        return pins

    def _before(self, f: dict[str, Any], name: str) -> bool:
        """Uploaded before the package's cutoff: the date's, or an exact pin's (whatever its date)."""
        uploaded = f.get("upload-time")
        try:
            return isinstance(uploaded, str) and \
                exclude_newer(uploaded) < self.later.get(canonicalize_name(name), self.cutoff)
        except ResolveError:
            return False

    def _python_ok(self, f: dict[str, Any]) -> bool:
        try:
            return SpecifierSet(str(f.get("requires-python") or "")).contains(f"{self.python}.0")
        except InvalidSpecifier:
            return True

    def _usable_wheel(self, filename: str) -> bool:
        try:
            return not self.tags.isdisjoint(parse_wheel_filename(filename)[3])
        except InvalidWheelFilename:
            return False

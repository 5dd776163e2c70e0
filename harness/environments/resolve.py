"""A project's dependencies read from its source tree without running it, and resolved as of a date.

The file is longer than most because reading the declarations, asking the resolver and standing in for
source-only releases are one job: turn a hostile source tree plus a date into exact pins.

    read_declarations(root)       requirements files, setup.cfg, pyproject.toml and setup.py read
                                  statically (setup.py with `ast`; nothing of the project is ever run)
    resolve(reqs, python, as_of)  exact pins for a Linux CPython 3.9/3.11/3.13 from `uv pip compile
                                  --exclude-newer`, cached under cache_dir()/resolutions by its inputs
    resolve_tree(root, ...)       both, for a source tree

No package code runs on the host: uv runs with `--no-build`, so it reads the metadata of wheels only.
A release that has no wheel for the target (an sdist only, e.g. MarkupSafe 1.1.1 for Python 3.9) would
make the resolution fail; when uv names such a package, its newest source-only releases before the
date are downloaded (never unpacked, never built), their declared dependencies are read from the
archive's PKG-INFO or egg-info/requires.txt, and uv is run again with a stand-in wheel holding only
that metadata. Those pins come back in `Resolution.sdist_only`: they must be built into wheels in a
network-less container before they can be installed.
"""

from __future__ import annotations

import ast
import configparser
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import urllib.parse
import urllib.request
import zipfile
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from harness import checks
from harness.core.sources import cache_dir
from harness.environments.wheelhouse import GLIBC_MINOR, WheelhouseError
from harness.errors import TaskError, UnsafePathError
from sandbox.api import Progress, quiet

INDEX_URL = "https://pypi.org/simple"
CACHE_VERSION = "3"        # bump when the cached result's meaning changes
PIN_CUTOFF = "2100-01-01T00:00:00Z"   # the per-package cutoff of an exact pin: any upload date
UV_MAX_GLIBC = 40          # the newest manylinux_2_N that uv's --python-platform names
MAX_ROUNDS = 40            # uv runs; each names one or two source-only packages to stand in for
STANDINS_PER_NAMING = 3    # source-only releases of a package given a stand-in each time uv names it
STANDINS_PER_PACKAGE = 9   # at most, newest first
MAX_TEXT = 1 << 20         # a declaration file or metadata member read, at most
MAX_SDIST = 200 << 20      # an sdist downloaded to read its metadata, at most

Runner = Callable[[list[str], str, Path], subprocess.CompletedProcess[str]]


class ResolveError(WheelhouseError):
    """The resolver found no set of pins (`said` holds uv's own words), or an input was refused."""

    def __init__(self, message: str, said: str = "") -> None:
        super().__init__(message)
        self.said = said


@dataclass(frozen=True)
class Declared:
    """One requirement a project declares, and where: e.g. "setup.py install_requires" or "requirements.txt:3"."""
    requirement: str
    origin: str


@dataclass(frozen=True)
class Unreadable:
    """A declaration that was not read (dynamic, outside the tree, a URL...), and why."""
    origin: str
    reason: str


@dataclass(frozen=True)
class Declarations:
    """What `read_declarations` found in a tree: the requirements, each with its origin, and what it could not read."""
    requirements: tuple[Declared, ...] = ()
    unreadable: tuple[Unreadable, ...] = ()

    def texts(self) -> list[str]:
        """The requirements, each once, in the order found."""
        return list(dict.fromkeys(d.requirement for d in self.requirements))


@dataclass(frozen=True)
class SdistOnly:
    """A pinned release with no wheel for the target: its sdist must be built in a network-less container."""
    name: str
    version: str
    filename: str
    url: str
    sha256: str
    dependencies_known: bool   # False: the archive declared none readably, so none were assumed


@dataclass(frozen=True)
class Resolution:
    pins: tuple[str, ...]                 # every "name==version", sorted, the sdist-only ones included
    sdist_only: tuple[SdistOnly, ...]     # the pins that have no wheel for the target
    requirements: tuple[str, ...]
    given_pins: tuple[str, ...]
    python: str
    platform: str                         # uv's --python-platform, e.g. "x86_64-manylinux_2_31"
    exclude_newer: str                    # releases uploaded at or after this instant were excluded
    command: tuple[str, ...]              # the uv command line; $WORK: its folder of stand-ins and overrides
    from_cache: bool = field(default=False, compare=False)

    def wheel_pins(self) -> list[str]:
        """The pins that have a wheel on the index for the target."""
        built = {(canonicalize_name(s.name), s.version) for s in self.sdist_only}
        return [p for p in self.pins if tuple(_split_pin(p)) not in built]


# -- reading the declarations ---------------------------------------------------------------------------

def read_declarations(root: Path, *, extras: Collection[str] = (), files: Sequence[str] = (),
                      any_requirements_file: bool = True, edits: Sequence[str] = ()) -> Declarations:
    """The requirements declared in the source tree at `root`, read as text and never executed:
    `requirements*.txt` and `requirements/*.txt` (only `files` when not `any_requirements_file`), plus
    `files` (paths relative to `root`), with their `-r` includes inside the tree, setup.cfg `[options]
    install_requires` and `setup_requires` (setuptools fetches those at install: offline they must be in
    the wheelhouse), pyproject.toml `[project] dependencies` and setup.py's `setup(install_requires=...,
    setup_requires=...)` when literal or module-level literal lists; the extras named in `extras` from each.
    Whatever is not read is in `unreadable`. `edits` are a recipe's pre-install commands: those of the
    form ``sed -i 's/OLD/NEW/' FILE`` are applied to FILE's text as it is read (as literal text, first
    match of each line), so that the declarations are the ones the install will see; others are ignored."""
    found = _Found(Path(root), sed_edits(edits))
    rels: list[str] = []
    if any_requirements_file:
        rels = sorted(p.name for p in found.root.glob("requirements*.txt"))
        rels += sorted(f"requirements/{p.name}" for p in found.root.glob("requirements/*.txt"))
    for rel in [*rels, *files]:
        found.requirements_file(rel, set())
    _setup_cfg(found, {canonicalize_name(e) for e in extras})
    _pyproject(found, {canonicalize_name(e) for e in extras})
    _setup_py(found, {canonicalize_name(e) for e in extras})
    return Declarations(tuple(found.declared), tuple(found.unreadable))


def sed_edits(commands: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """{file: [(old, new), ...]} of the commands that are ``sed -i 's/OLD/NEW/' FILE`` (literal text once
    backslash escapes are removed); anything else is left out."""
    out: dict[str, list[tuple[str, str]]] = {}
    for command in commands:
        try:
            words = shlex.split(command)
        except ValueError:
            continue
        if len(words) != 4 or words[:2] != ["sed", "-i"]:
            continue
        match = re.fullmatch(r"s/((?:[^/\\]|\\.)*)/((?:[^/\\]|\\.)*)/", words[2])
        if match and match.group(1):
            old, new = (re.sub(r"\\(.)", r"\1", g) for g in match.groups())
            out.setdefault(words[3], []).append((old, new))
    return out


class _Found:
    def __init__(self, root: Path, edits: dict[str, list[tuple[str, str]]] | None = None) -> None:
        self.root = root
        self.edits = edits or {}
        self.declared: list[Declared] = []
        self.unreadable: list[Unreadable] = []

    def add(self, text: str, origin: str) -> None:
        try:
            self.declared.append(Declared(checks.requirement(text, origin, pinned=False), origin))
        except TaskError as exc:
            self.unreadable.append(Unreadable(origin, str(exc)))

    def text(self, rel: str) -> str | None:
        """The file `root/rel` as text, or None (recorded) if it is missing, outside or not a regular file."""
        try:
            text = _read_inside(self.root, rel)
            for old, new in self.edits.get(rel, []):
                text = "".join(line.replace(old, new, 1) for line in text.splitlines(keepends=True))
            return text
        except (UnsafePathError, OSError, UnicodeDecodeError) as exc:
            self.unreadable.append(Unreadable(rel, f"not read: {exc}"))
            return None

    def requirements_file(self, rel: str, seen: set[str]) -> None:
        if rel in seen:
            return
        seen.add(rel)
        text = self.text(rel)
        for number, line in _logical_lines(text or ""):
            origin = f"{rel}:{number}"
            include = re.match(r"(-r|--requirement)(\s+|=)(\S+)$", line)
            if include:
                self.requirements_file(_beside(rel, include.group(3)), seen)
                continue
            if line.startswith("-"):
                continue
            line = re.split(r"\s--?[A-Za-z]", line, maxsplit=1)[0].strip()   # per-line options: --hash=...
            if re.match(r"[\w.+-]+:|[./~]", line):
                self.unreadable.append(Unreadable(origin, f"{line!r} is a URL or path, not an index requirement"))
            else:
                self.add(line, origin)


def _beside(rel: str, target: str) -> str:
    """The tree-relative path of `target` named in the file `rel` (absolute targets stay absolute, refused later)."""
    return target if target.startswith("/") else os.path.normpath(os.path.join(os.path.dirname(rel), target))


def _read_inside(root: Path, rel: str) -> str:
    """`root/rel` read without following a link, only if it is a regular file inside `root`."""
    fd = checks.open_beneath(root, rel, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePathError(f"{rel} is not a regular file")
        return handle.read(MAX_TEXT).decode("utf-8")


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of a requirements file: continuations joined, comments and blanks dropped."""
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        start = start or number
        if raw.endswith("\\"):
            pending += raw[:-1]
            continue
        line = re.sub(r"(^|\s)#.*", "", pending + raw).strip()
        if line:
            yield start, line
        pending, start = "", 0


def _setup_cfg(found: _Found, extras: set[str]) -> None:
    if not (found.root / "setup.cfg").exists():
        return
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(found.text("setup.cfg") or "")
    except configparser.Error as exc:
        found.unreadable.append(Unreadable("setup.cfg", f"not an ini file: {str(exc).splitlines()[0]}"))
        return
    for key in ("install_requires", "setup_requires"):   # setup_requires: fetched by setuptools at install
        if parser.has_option("options", key):
            _cfg_list(found, parser.get("options", key), f"setup.cfg [options] {key}")
    if parser.has_section("options.extras_require"):
        for key, value in parser.items("options.extras_require"):
            if canonicalize_name(key) in extras:
                _cfg_list(found, value, f"setup.cfg [options.extras_require] {key}")


def _cfg_list(found: _Found, value: str, origin: str) -> None:
    if value.strip().startswith("file:"):
        for rel in value.strip()[5:].split(","):
            found.requirements_file(rel.strip(), set())
    elif value.strip().startswith("attr:"):
        found.unreadable.append(Unreadable(origin, f"{value.strip()!r} names code: not statically readable"))
    else:
        for line in value.splitlines():
            if line.strip() and not line.strip().startswith("#"):
                found.add(line.strip(), origin)


def _pyproject(found: _Found, extras: set[str]) -> None:
    if not (found.root / "pyproject.toml").exists():
        return
    try:
        data = tomllib.loads(found.text("pyproject.toml") or "")
    except tomllib.TOMLDecodeError as exc:
        found.unreadable.append(Unreadable("pyproject.toml", f"not TOML: {exc}"))
        return
    project, tool = _table(data, "project"), _table(data, "tool")
    origin = "pyproject.toml [project]"
    _toml_list(found, project.get("dependencies", []), f"{origin} dependencies")
    for key, value in _table(project, "optional-dependencies").items():
        if canonicalize_name(str(key)) in extras:
            _toml_list(found, value, f"{origin} optional-dependencies {key}")
    dynamic = _table(_table(_table(tool, "setuptools"), "dynamic"), "dependencies")
    if "dependencies" in (project.get("dynamic") or []) and dynamic:
        files = dynamic.get("file", [])
        for rel in [files] if isinstance(files, str) else files if isinstance(files, list) else []:
            found.requirements_file(str(rel), set())
    if "dependencies" in _table(tool, "poetry"):
        found.unreadable.append(Unreadable("pyproject.toml [tool.poetry.dependencies]",
                                           "Poetry's own dependency table is not read"))


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    """`data[key]` if it is a table, else an empty one (a hostile file may put anything there)."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _toml_list(found: _Found, value: object, origin: str) -> None:
    if not isinstance(value, list):
        found.unreadable.append(Unreadable(origin, f"expected a list of requirements, got {type(value).__name__}"))
        return
    for item in value:
        found.add(item if isinstance(item, str) else repr(item), origin)


def _setup_py(found: _Found, extras: set[str]) -> None:
    if not (found.root / "setup.py").exists():
        return
    try:
        tree = ast.parse(found.text("setup.py") or "", "setup.py")
    except (SyntaxError, ValueError, RecursionError) as exc:
        found.unreadable.append(Unreadable("setup.py", f"not Python this host can parse: {exc}"))
        return
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _called(n) == "setup"]
    if len(calls) != 1:
        found.unreadable.append(Unreadable("setup.py", f"{len(calls)} setup() calls found, expected one"))
        return
    names = _module_lists(tree)
    keywords = {k.arg: k.value for k in calls[0].keywords}
    if None in keywords:
        found.unreadable.append(Unreadable("setup.py", f"setup(**...) at line {calls[0].lineno}: not statically "
                                                       "readable; its install_requires may be missed"))
    for listed in ("install_requires", "setup_requires"):
        if listed in keywords:
            _py_list(found, keywords[listed], names, f"setup.py {listed}")
    extra_node = keywords.get("extras_require")
    if extras and isinstance(extra_node, ast.Name):
        extra_node = names.get(extra_node.id, extra_node)
    if extras and isinstance(extra_node, ast.Dict):
        for key, value in zip(extra_node.keys, extra_node.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and canonicalize_name(key.value) in extras:
                _py_list(found, value, names, f"setup.py extras_require {key.value}")
    elif extras and extra_node is not None:
        found.unreadable.append(Unreadable("setup.py extras_require", _dynamic(extra_node)))


def _called(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _module_lists(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level names bound once, by a plain assignment, and never changed after: bound nowhere else,
    no method called on them, no item or attribute assigned, and passed to no call but setup()."""
    nodes = list(ast.walk(tree))
    stores = Counter(n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    methods = {c.func for c in nodes if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)}
    changed = {n.value.id for n in nodes if isinstance(n, (ast.Subscript, ast.Attribute))
               and isinstance(n.value, ast.Name) and (isinstance(n.ctx, ast.Store) or n in methods)}
    for call in (n for n in nodes if isinstance(n, ast.Call) and _called(n) != "setup"):
        changed |= {a.id for a in [*call.args, *(k.value for k in call.keywords)] if isinstance(a, ast.Name)}
    top = {n.targets[0].id: n.value for n in tree.body
           if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
    return {name: value for name, value in top.items() if stores[name] == 1 and name not in changed}


def _py_list(found: _Found, node: ast.expr, names: dict[str, ast.expr], origin: str) -> None:
    items = _literal_strings(node, names)
    if items is None:
        found.unreadable.append(Unreadable(origin, _dynamic(node)))
        return
    for item in items:
        found.add(item, origin)


def _literal_strings(node: ast.expr, names: dict[str, ast.expr], depth: int = 0) -> list[str] | None:
    """The strings of a literal list/tuple, a name bound once to one, or a `+` of those; else None."""
    if depth > 10:
        return None
    if isinstance(node, ast.Name) and node.id in names:
        return _literal_strings(names[node.id], names, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal_strings(node.left, names, depth + 1), _literal_strings(node.right, names, depth + 1)
        return None if left is None or right is None else left + right
    if isinstance(node, (ast.List, ast.Tuple)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return [str(e.value) for e in node.elts if isinstance(e, ast.Constant)]
    return None


def _dynamic(node: ast.expr) -> str:
    return (f"{ast.unparse(node)[:120]!r} at line {node.lineno} is computed: not statically readable "
            "(setup.py is never run); declare the requirements in the task's pins instead")


# -- resolving ------------------------------------------------------------------------------------------

def resolve_tree(root: Path, python: str, as_of: datetime | date | str, *, pins: Sequence[str] = (),
                 extras: Collection[str] = (), files: Sequence[str] = (),
                 progress: Progress = quiet) -> tuple[Declarations, Resolution]:
    """`read_declarations(root)` and their `resolve` with `pins`.

    Raises:
        ResolveError: see `resolve`.
    """
    declared = read_declarations(root, extras=extras, files=files)
    return declared, resolve(declared.texts(), python, as_of, pins=pins, progress=progress)


def resolve(requirements: Sequence[str], python: str, as_of: datetime | date | str, *,
            pins: Sequence[str] = (), forward: Collection[str] = (), leave_out: Collection[str] = (),
            runner: Runner | None = None,
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
    if python not in GLIBC_MINOR:
        raise ResolveError(f"Python {python!r} has no target here; expected one of {sorted(GLIBC_MINOR)}, e.g. \"3.9\"")
    cutoff = exclude_newer(as_of)
    plat = f"{platform.machine()}-manylinux_2_{min(GLIBC_MINOR[python], UV_MAX_GLIBC)}"
    ahead = sorted({canonicalize_name(n) for n in forward})
    dropped = sorted({canonicalize_name(n) for n in leave_out})
    key = hashlib.sha256(json.dumps([CACHE_VERSION, sorted(reqs), sorted(given), python, plat, cutoff, index_url,
                                     ahead, dropped]).encode()).hexdigest()[:24]
    path = checks.private_dir(cache if cache is not None else cache_dir() / "resolutions") / f"{key}.json"
    hit = _load(path)
    if hit is not None:
        return hit
    failed = path.with_suffix(".failed.json")
    _raise_cached_failure(failed)
    progress(f"resolving {len(reqs) + len(given)} requirement(s) for Python {python} as of {cutoff} with uv")
    try:
        try:
            result = _Resolver(reqs, given, python, plat, cutoff, index_url, runner or run_uv, progress, ahead,
                               dropped).run()
        except ResolveError:
            # the recipe pins releases newer than the date (xarray's dask 2022.8.1 for a 2019 instance), whose
            # own dependencies are newer still: the environment cannot be older than the newest release it holds
            newest = _newest_exact_pin(reqs + given, index_url)
            if newest is None or newest <= cutoff:
                raise
            progress(f"resolve: nothing resolves as of {cutoff[:10]} with the exact pins, the newest of which was "
                     f"released {newest[:10]}; resolving as of then")
            result = _Resolver(reqs, given, python, plat, newest, index_url, runner or run_uv, progress, ahead,
                               dropped).run()
    except ResolveError as exc:
        if _NO_SOLUTION in exc.said:       # uv's verdict on these inputs, not a network or input problem
            checks.write_file(failed, json.dumps({"message": str(exc), "said": exc.said}, indent=1) + "\n")
        raise
    checks.write_file(path, json.dumps(asdict(result), indent=1) + "\n")
    return result


_NO_SOLUTION = "No solution found"


def _raise_cached_failure(path: Path) -> None:
    """Raise the ResolveError recorded for the same inputs: a resolution uv found impossible stays
    impossible (a failed attempt of the fallbacks is asked again for every instance of an environment)."""
    try:
        data = json.loads(path.read_text())
        message, said = str(data["message"]), str(data["said"])
    except (OSError, ValueError, TypeError, KeyError):
        return
    raise ResolveError(message, said)


def is_exact_pin(requirement: str) -> bool:
    """``name==version`` with nothing else (no marker, no wildcard, no other specifier)."""
    return re.fullmatch(r"[A-Za-z0-9._-]+==[^,;\s*]+", requirement.strip()) is not None


def _newest_exact_pin(requirements: Sequence[str], index_url: str) -> str | None:
    """The upload instant (as `exclude_newer` gives it, a day later) of the newest release among the exact
    pins (``name==1.2``) of `requirements`, or None when there is none."""
    newest: str | None = None
    for text in requirements:
        if not is_exact_pin(text):
            continue
        name, version = _split_pin(text)
        for f in _index_files(index_url, name):
            uploaded = f.get("upload-time")
            if isinstance(uploaded, str) and _file_version(str(f.get("filename", ""))) == _version(version):
                when = exclude_newer(uploaded[:10])
                newest = when if newest is None or when > newest else newest
    return newest


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def exclude_newer(as_of: datetime | date | str) -> str:
    """The instant (RFC 3339, UTC) before which releases count: a date means the end of that UTC day,
    a datetime without a zone is taken as UTC. E.g. "2019-06-01" -> "2019-06-02T00:00:00Z"."""
    if isinstance(as_of, str):
        try:
            as_of = datetime.fromisoformat(as_of) if "T" in as_of or " " in as_of else date.fromisoformat(as_of)
        except ValueError as exc:
            raise ResolveError(f"date {as_of!r} is not ISO 8601; expected e.g. \"2019-03-20T03:46:18Z\" "
                               "or \"2019-06-01\"") from exc
    if not isinstance(as_of, datetime):
        as_of = datetime(as_of.year, as_of.month, as_of.day, tzinfo=UTC) + timedelta(days=1)
    as_of = as_of.replace(tzinfo=UTC) if as_of.tzinfo is None else as_of.astimezone(UTC)
    return as_of.strftime("%Y-%m-%dT%H:%M:%SZ")


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
                 leave_out: Collection[str] = ()) -> None:
        self.reqs, self.given, self.python, self.plat = reqs, given, python, plat
        self.cutoff, self.index_url, self.runner, self.progress = cutoff, index_url, runner, progress
        self.forward = set(forward)
        self.leave_out = sorted(leave_out)
        # per-package cutoffs: exact pins whatever their date, forward packages up to their first wheel
        self.later: dict[str, str] = {_split_pin(p)[0]: PIN_CUTOFF for p in [*reqs, *given]
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
            for _ in range(MAX_ROUNDS):
                cmd = self.command(work)
                wanted = [r for r in [*self.reqs, *self.given]
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
                    _standin(work / "standins", sdist, requires, python_req)
                    self.standins[(canonicalize_name(sdist.name), sdist.version)] = sdist
        raise self.failure(proc.stderr)

    def result(self, stdout: str, cmd: list[str]) -> Resolution:
        pins = sorted({line.strip() for line in stdout.splitlines() if "==" in line and not line.startswith("#")})
        pinned = {tuple(_split_pin(p)) for p in pins}
        chosen = [self.standins[k] for k in sorted(self.standins) if k in pinned]
        return Resolution(tuple(pins), tuple(chosen), tuple(self.reqs), tuple(self.given), self.python, self.plat,
                          self.cutoff, tuple(cmd))

    def failure(self, stderr: str) -> ResolveError:
        said = "\n".join(line for line in stderr.strip().splitlines() if not line.startswith("warning:"))
        return ResolveError(
            f"uv found no versions of {self.reqs + self.given} for Python {self.python} ({self.plat}) among releases "
            f"uploaded before {self.cutoff} that have a wheel or a readable sdist; it said:\n{said}\n"
            "Expected a resolvable set: pin the package uv names to a version of that time, or move the date", said)

    def nearest_with_wheel(self, pin: str) -> str:
        """`pin`, or for an exact pin whose release has no wheel for the target, the first later release of
        the same series (major.minor) that has one."""
        if not is_exact_pin(pin):
            return pin
        name, version = _split_pin(pin)
        try:
            wanted = Version(version)
        except InvalidVersion:
            return pin
        wheels: set[Version] = set()
        for f in _index_files(self.index_url, name):
            v = _file_version(str(f.get("filename", "")))
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
        dated = [(v, str(f.get("upload-time", ""))) for f in _index_files(self.index_url, name)
                 if not f.get("yanked") and self._usable_wheel(str(f.get("filename", "")))
                 and (v := _file_version(str(f["filename"]))) is not None and not v.is_prerelease]
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
        return [_read_sdist(name, str(version), sdist) for version, sdist in batch]

    def sdist_releases(self, name: str) -> list[tuple[Version, dict[str, Any]]]:
        """The releases of `name` before the date, newer than its newest release with a wheel for the
        target, that have an sdist (newest first), each with its sdist's index entry."""
        by_version: dict[Version, list[dict[str, Any]]] = {}
        for f in _index_files(self.index_url, name):
            version = _file_version(str(f.get("filename", "")))
            if version is not None and not version.is_prerelease and not f.get("yanked") and self._before(f, name) \
                    and self._python_ok(f):
                by_version.setdefault(version, []).append(f)
        found = []
        for version in sorted(by_version, reverse=True):
            if any(self._usable_wheel(str(f["filename"])) for f in by_version[version]):
                break
            sdist = next((f for f in by_version[version] if _file_version(str(f["filename"]), sdist=True)), None)
            if sdist is not None:
                found.append((version, sdist))
        return found

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


def target_tags(python: str) -> frozenset[Tag]:
    """The wheel tags a Linux CPython `python` with the glibc of its Debian release accepts."""
    version = (int(python.split(".")[0]), int(python.split(".")[1]))
    machine = platform.machine()
    plats = [f"manylinux_2_{m}_{machine}" for m in range(GLIBC_MINOR[python], 4, -1)]
    plats += [f"manylinux2014_{machine}", f"manylinux2010_{machine}", f"manylinux1_{machine}"]
    return frozenset([*cpython_tags(version, platforms=plats),
                      *compatible_tags(version, f"cp{version[0]}{version[1]}", plats)])


def _split_pin(pin: str) -> list[str]:
    name, _, version = pin.partition("==")
    return [canonicalize_name(name), version.strip()]


def _file_version(filename: str, *, sdist: bool = False) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return None if sdist else parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidSdistFilename, InvalidWheelFilename, InvalidVersion):
        return None


def _index_files(index_url: str, name: str) -> list[dict[str, Any]]:
    """The files of project `name` on the index (PEP 691 JSON: filename, url, hashes, upload-time...)."""
    url = f"{index_url.rstrip('/')}/{canonicalize_name(name)}/"
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            data = json.loads(answer.read(64 << 20))
    except (OSError, ValueError) as exc:
        raise ResolveError(f"the index page {url} of {name!r} could not be read ({exc}); expected the PEP 691 "
                           "JSON of a simple index such as https://pypi.org/simple") from exc
    files = data.get("files", []) if isinstance(data, dict) else []
    usable = []
    for f in files:
        if isinstance(f, dict) and isinstance(f.get("url"), str):
            f["url"] = urllib.parse.urljoin(url, f["url"])
            if urllib.parse.urlsplit(f["url"]).scheme in ("https", "http"):
                usable.append(f)
    return usable


def _read_sdist(name: str, version: str, f: dict[str, Any]) -> tuple[SdistOnly, list[str], str]:
    """The sdist of `f` downloaded into a temporary file (checked against its sha256) and its declared
    dependencies read from the archive's members as text: nothing is unpacked, built or run."""
    sha256 = str(f.get("hashes", {}).get("sha256", ""))
    with tempfile.TemporaryFile() as tmp:
        digest = hashlib.sha256()
        with urllib.request.urlopen(str(f["url"]), timeout=300) as answer:
            while chunk := answer.read(1 << 20):
                digest.update(chunk)
                tmp.write(chunk)
                if tmp.tell() > MAX_SDIST:
                    raise ResolveError(f"the sdist {f['filename']} is over {MAX_SDIST >> 20} MB; not read")
        if sha256 and digest.hexdigest() != sha256:
            raise ResolveError(f"the sdist {f['filename']} has sha256 {digest.hexdigest()}, the index says {sha256}")
        tmp.seek(0)
        members = _metadata_members(tmp, str(f["filename"]))
    requires, known = _declared_requires(members)
    for text in requires:
        if Requirement(text).url is not None:
            raise ResolveError(f"the sdist {f['filename']} of {name} {version} requires {text!r}, a direct "
                               "reference (a URL, not a version from the index): refused, and nothing was fetched "
                               f"from it; pin another version of {name}")
    sdist = SdistOnly(name, version, str(f["filename"]), str(f["url"]), sha256, known)
    return sdist, requires, str(f.get("requires-python") or "")


def _metadata_members(archive: IO[bytes], filename: str) -> dict[str, str]:
    """PKG-INFO and egg-info members of an sdist (top folder removed from their names), as text."""
    wanted = re.compile(r"[^/]+/((?:src/)?[^/]+\.egg-info/(?:PKG-INFO|requires\.txt)|PKG-INFO)")
    out: dict[str, str] = {}
    try:
        if filename.endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                for info in zf.infolist():
                    if wanted.fullmatch(info.filename) and not info.is_dir() and info.file_size <= MAX_TEXT:
                        out[info.filename.split("/", 1)[1]] = zf.read(info).decode("utf-8", "replace")
            return out
        with tarfile.open(fileobj=archive, mode="r:*") as tf:
            for member in tf:
                handle = tf.extractfile(member) if member.isreg() and wanted.fullmatch(member.name) else None
                if handle is not None and member.size <= MAX_TEXT:
                    out[member.name.split("/", 1)[1]] = handle.read().decode("utf-8", "replace")
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise ResolveError(f"the sdist {filename} is not a readable archive ({exc})") from exc
    return out


def _declared_requires(members: dict[str, str]) -> tuple[list[str], bool]:
    """(Requires-Dist lines, whether they are known) from an sdist's PKG-INFO or egg-info/requires.txt."""
    head = members.get("PKG-INFO", "").split("\n\n", 1)[0]
    fields = [line.split(":", 1) for line in head.splitlines() if ":" in line]
    dist = [v.strip() for k, v in fields if k.strip().lower() == "requires-dist"]
    dynamic = {v.strip().lower() for k, v in fields if k.strip().lower() == "dynamic"}
    meta = next((v.strip() for k, v in fields if k.strip().lower() == "metadata-version"), "1.0")
    if dist or (_version_at_least(meta, "2.2") and "requires-dist" not in dynamic):
        return _valid_lines(dist), True
    egg = {k.rsplit("/", 1)[1]: v for k, v in members.items() if ".egg-info/" in k}
    if "requires.txt" in egg:
        return _valid_lines(_requires_txt(egg["requires.txt"])), True
    return [], "PKG-INFO" in egg


def _version_at_least(text: str, least: str) -> bool:
    try:
        return Version(text) >= Version(least)
    except InvalidVersion:
        return False


def _requires_txt(text: str) -> list[str]:
    """egg-info/requires.txt as Requires-Dist lines: `[extra]`, `[:marker]` and `[extra:marker]` sections."""
    out, markers = [], []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            extra, _, marker = line[1:-1].partition(":")
            markers = ([f'extra == "{canonicalize_name(extra)}"'] if extra else []) + ([marker] if marker else [])
        elif line and not line.startswith("#"):
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            parts = [*markers, *([str(req.marker)] if req.marker else [])]
            req.marker = None
            out.append(f"{req}; " + " and ".join(f"({m})" for m in parts) if parts else str(req))
    return out


def _valid_lines(lines: list[str]) -> list[str]:
    valid = []
    for line in lines:
        try:
            valid.append(str(Requirement(line)))
        except InvalidRequirement:
            continue
    return valid


def _standin(folder: Path, sdist: SdistOnly, requires: list[str], requires_python: str) -> None:
    """A wheel holding only the metadata of `sdist` (never installed: it lets uv resolve without building)."""
    name, version = canonicalize_name(sdist.name).replace("-", "_"), sdist.version
    extras = sorted(set(re.findall(r'extra == "([^"]+)"', "\n".join(requires))))
    lines = ["Metadata-Version: 2.1", f"Name: {sdist.name}", f"Version: {version}"]
    try:
        lines += [f"Requires-Python: {SpecifierSet(requires_python)}"] if requires_python else []
    except InvalidSpecifier:
        pass
    lines += [f"Provides-Extra: {e}" for e in extras] + [f"Requires-Dist: {r}" for r in requires]
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as zf:
        zf.writestr(f"{info}/METADATA", "\n".join(lines) + "\n\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: harness-standin\nRoot-Is-Purelib: true\n"
                                     "Tag: py3-none-any\n\n")
        zf.writestr(f"{info}/RECORD", "")

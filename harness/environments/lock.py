"""The lock of an environment: every distribution it installs, with its file's name, URL and sha256, the
toolchain, the inputs it was made from and what happened while it was made. One JSON file per
(repository, version, interpreter, platform), or, for a task that brings its own requirements, per
content of its recipe.

    find_lock(key, recipe)     package data first (harness/data/locks/), then the user cache; a lock
                               made from another recipe (the spec table changed) is not taken
    store_lock(lock)           into the user cache (cache_dir()/locks/), replacing a stale one
    Lock.files_digest()        what the environment image's tag derives from: the same lock gives the
                               same image tag on every machine
    Lock.wheelhouse()          every wheel the environment image holds: the installed ones, the
                               isolated build's and the rows' (`row_wheels.py`), the last two uninstalled

A lock is read whole or refused: a file that is not one (another format, a damaged file) is reported
and made again, never half-used.
"""

from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from harness import checks
from harness.core.sources import cache_dir
from harness.environments.wheelhouse import GLIBC_MINOR
from harness.errors import TaskError
from sandbox.api import Progress, quiet

LOCK_FORMAT = 1          # bump when a lock's meaning changes: older files are then made again
Kind = Literal["wheel", "sdist"]
OWN = "own"              # the `repo` of a lock keyed by its recipe's content


@dataclass(frozen=True)
class LockedFile:
    """One distribution of a lock, as one file of the index: installed as it is (a wheel) or built into a
    wheel in a network-less container first (an sdist)."""
    name: str              # normalised project name, e.g. "sqlparse"
    version: str
    filename: str
    sha256: str
    url: str
    kind: Kind

    def pin(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class RowFile(LockedFile):
    """A wheel that some rows of the version require beyond the lock's packages (their trees declare it;
    `row_wheels.py`): in the environment's wheelhouse, never installed in the venv, so that a row's
    offline install finds it as pip online would. `rows` are the instance ids that need it."""
    rows: tuple[str, ...] = ()


@dataclass(frozen=True)
class LockKey:
    """Which environment a lock is: (repository, version) for a row of the spec table, (OWN, digest of
    the recipe) for a task that brings its own requirements; its interpreter and platform."""
    repo: str
    version: str
    python: str
    platform: str          # uv's --python-platform, e.g. "x86_64-manylinux_2_31"

    def relative_path(self) -> str:
        """Where the lock lives under a locks folder: `django__django/3.0-py3.9-x86_64.json`."""
        folder = checks.identifier(self.repo.replace("/", "__"), "lock", "repository")
        version = checks.identifier(self.version, "lock", "version")
        machine = self.platform.split("-", 1)[0]
        return f"{folder}/{version}-py{self.python}-{checks.identifier(machine, 'lock', 'platform')}.json"


def target_platform(python: str) -> str:
    """The platform a lock for `python` is made for on this machine (uv's --python-platform)."""
    return f"{platform.machine()}-manylinux_2_{min(GLIBC_MINOR[python], 40)}"


@dataclass(frozen=True)
class LockInputs:
    """What the lock was made from (recorded, so that a reader can tell why it holds what it holds)."""
    recipe: str                       # digest of the recipe's inputs (`recipe_digest`): a lock serves only it
    as_of: str                        # releases uploaded at or after this instant were not taken
    as_of_from: str                   # how that date was found
    declarations_from: str            # which tree the project's declared requirements were read from
    requirements: tuple[str, ...]     # what was resolved: declared, build requirements, a row's own
    pins: tuple[str, ...]             # the recipe's pins


@dataclass(frozen=True)
class LockOutcome:
    """What making the lock ran into: source-only releases that did not build offline, and what was
    taken instead (the first later release with a wheel, or nothing for an optional test dependency)."""
    sdists_failed: tuple[str, ...] = ()     # file names
    forward: tuple[str, ...] = ()           # projects taken at their first release with a wheel
    left_out: tuple[str, ...] = ()          # projects not installed at all
    notes: tuple[str, ...] = ()             # what the resolution said along the way


@dataclass(frozen=True)
class Lock:
    key: LockKey
    inputs: LockInputs
    toolchain: tuple[LockedFile, ...]       # pip, setuptools, wheel of the venv
    packages: tuple[LockedFile, ...]        # installed into the venv (sdists built first)
    build_only: tuple[LockedFile, ...] = ()  # wheels for the project's isolated build only, never installed
    outcome: LockOutcome = field(default_factory=LockOutcome)
    format: int = LOCK_FORMAT
    row_wheels: tuple[RowFile, ...] = ()     # wheels some rows' own trees require, never installed

    def files_digest(self) -> str:
        """A digest of every file the environment is made of (name, version, file, sha256, role); the rows'
        wheels count only when there are some, so a lock without them keeps the digest it always had."""
        roles = [("toolchain", self.toolchain), ("packages", self.packages), ("build_only", self.build_only)]
        if self.row_wheels:
            roles.append(("row_wheels", self.row_wheels))
        parts = [[role, [[f.name, f.version, f.filename, f.sha256, f.kind] for f in files]] for role, files in roles]
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

    def wheels(self) -> tuple[LockedFile, ...]:
        """The wheels of the venv and of the project's isolated build (what the sdists are built beside)."""
        return tuple(f for f in (*self.toolchain, *self.packages, *self.build_only) if f.kind == "wheel")

    def wheelhouse(self) -> tuple[LockedFile, ...]:
        """Every wheel of the environment image's wheelhouse: `wheels()` and the rows' wheels."""
        return (*self.wheels(), *self.row_wheels)

    def sdists(self) -> tuple[LockedFile, ...]:
        return tuple(f for f in self.packages if f.kind == "sdist")

    def text(self) -> str:
        """The lock as JSON; `row_wheels` only when there are some (the field is optional: a lock written
        before it existed reads the same, and code that does not know it reads a lock that has it)."""
        data = asdict(self)
        if not self.row_wheels:
            del data["row_wheels"]
        return json.dumps(data, indent=1, sort_keys=True) + "\n"


class LockError(TaskError):
    """A lock file could not be read as one (its path and what was wrong are in the message)."""


def recipe_digest(parts: dict[str, Any]) -> str:
    """The digest of a recipe's inputs (JSON-able values) with the lock format: a lock serves only the
    recipe it was made from."""
    return hashlib.sha256(json.dumps([LOCK_FORMAT, parts], sort_keys=True).encode()).hexdigest()[:24]


def lock_from_text(text: str, where: str) -> Lock:
    """The lock in `text` (read from `where`).

    Raises:
        LockError: not JSON, another format, or a field missing or of the wrong type.
    """
    try:
        data = json.loads(text)
        if data.get("format") != LOCK_FORMAT:
            raise LockError(f"{where} is a lock of format {data.get('format')!r}; this harness reads format "
                            f"{LOCK_FORMAT}: it is made again")
        return Lock(key=LockKey(**data["key"]), inputs=_inputs(data["inputs"]),
                    toolchain=_files(data["toolchain"]), packages=_files(data["packages"]),
                    build_only=_files(data["build_only"]),
                    outcome=LockOutcome(**{k: tuple(v) for k, v in data["outcome"].items()}),
                    row_wheels=_row_files(data.get("row_wheels", [])))
    except LockError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise LockError(f"{where} is not a lock ({type(exc).__name__}: {exc}); expected the JSON a lock is "
                        "written as (see docs/evaluation.md, 'Locks')") from exc


def _files(items: list[dict[str, Any]]) -> tuple[LockedFile, ...]:
    files = tuple(LockedFile(**data) for data in items)
    for locked in files:
        if locked.kind not in ("wheel", "sdist") or len(locked.sha256) != 64:
            raise ValueError(f"file {locked.filename!r}: kind {locked.kind!r}, sha256 {locked.sha256!r}")
    return files


def _row_files(items: list[dict[str, Any]]) -> tuple[RowFile, ...]:
    files = tuple(RowFile(**{**data, "rows": tuple(data["rows"])}) for data in items)
    for locked in files:
        if locked.kind != "wheel" or len(locked.sha256) != 64 or not locked.rows:
            raise ValueError(f"row wheel {locked.filename!r}: kind {locked.kind!r}, sha256 {locked.sha256!r}, "
                             f"rows {locked.rows!r} (expected a wheel, its sha256 and the rows that need it)")
    return files


def _inputs(data: dict[str, Any]) -> LockInputs:
    return LockInputs(recipe=str(data["recipe"]), as_of=str(data["as_of"]), as_of_from=str(data["as_of_from"]),
                      declarations_from=str(data["declarations_from"]), requirements=tuple(data["requirements"]),
                      pins=tuple(data["pins"]))


def shipped_locks() -> Any:
    """The folder of the locks that ship with the package (a Traversable)."""
    return resources.files("harness") / "data" / "locks"


def user_locks() -> Path:
    return cache_dir() / "locks"


def find_lock(key: LockKey, recipe: str, progress: Progress = quiet) -> Lock | None:
    """The lock of `key` made from `recipe`: the package's first, then the user cache's; None when there is
    none (or only ones made from another recipe or damaged, which `progress` is told of)."""
    rel = key.relative_path()
    shipped = shipped_locks().joinpath(*rel.split("/"))
    candidates: list[tuple[str, str | None]] = [
        (f"the shipped lock {rel}", shipped.read_text(encoding="utf-8") if shipped.is_file() else None),
        (str(user_locks() / rel), _read(user_locks() / rel))]
    for where, text in candidates:
        if text is None:
            continue
        try:
            lock = lock_from_text(text, where)
        except LockError as exc:
            progress(str(exc))
            continue
        if lock.key == key and lock.inputs.recipe == recipe:
            return lock
        progress(f"{where} was made from another recipe (or for another key): not taken")
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None


def store_lock(lock: Lock, folder: Path | None = None) -> Path:
    """Write `lock` under `folder` (default: the user cache's locks) at its key's path, atomically."""
    path = (folder or user_locks()) / lock.key.relative_path()
    if folder is None:
        checks.private_dir(path.parent)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    checks.write_file(path, lock.text(), mode=0o644)
    return path

"""The wheels a version's rows require beyond its lock: what the official harness's online `pip install -e .`
of each row's tree would fetch, found when the lock is made, so that the offline install finds it too.

    unmet(lock, env, root)            the requirements the tree at `root` declares that the lock's
                                      installed distributions (and, for its build, its build wheels) do
                                      not satisfy; read as text (`declarations.py`), nothing run
    row_wheels(lock, env, rows)       for each row with unmet requirements, those resolved as of the row's
                                      date, never before the interpreter's (`row_date`), by
                                      `resolver.resolve` with the lock's platform and tag rules, and the
                                      files of what the lock does not hold: `Lock.row_wheels`
    with_row_wheels(lock, env, rows)  `lock` carrying them (its packages unchanged), notes added
    declaration_tree(clone, commit)   the declaration files of a commit, from a git clone, into a folder

The official harness builds one environment per version and installs each row's tree into it with the
network: pip keeps what the environment has when it satisfies the tree, and fetches (or downgrades to)
what the tree requires beyond it. Here the install is offline; the rows' wheels lie uninstalled in the
environment's wheelhouse, where that same `pip install -e .` finds them (pylint-7080 requires
`astroid<=2.12.0-dev0,>=2.11.6`, and pylint 2.15's lock has astroid 2.12.13).

The row's requirements are resolved together with the lock's installed pins, as pip would keep them; when
they conflict (pip would then replace an installed one), alone. Limits: a requirement's extras
(`foo[bar]`) count as met when `foo` is; a requirement resolving to a release with no wheel for the target
is not carried (the lock's notes say so).
"""

from __future__ import annotations

import dataclasses
import io
import tarfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from harness import checks
from harness.core import hostgit
from harness.core.task import Environment, Task
from harness.environments.declarations import build_requires, read_declarations
from harness.environments.lock import Lock, LockedFile, RowFile
from harness.environments.lock_files import locked_files
from harness.environments.recipe import TOOLCHAIN_FLOOR
from harness.environments.resolution import IndexUnreachable, Resolution, ResolveError, exclude_newer, split_pin
from harness.environments.resolver import resolve
from harness.environments.wheelhouse import target_environment
from harness.errors import TaskError
from sandbox.api import Progress, quiet

DECLARATION_FILES = ("setup.py", "setup.cfg", "pyproject.toml")
MAX_DECLARATION_BYTES = 8 << 20      # the declaration files of one commit, at most


@dataclass(frozen=True)
class RowTree:
    """One row of a version: its instance id, a folder holding its tree (at least its declaration files),
    its date (`created_at`), as of which its own requirements are resolved, and whether its install builds
    the project in an isolated environment (then its build requirements count; not with
    `--no-build-isolation`, scikit-learn's, which builds with the venv's)."""
    task_id: str
    root: Path
    as_of: str
    isolated_build: bool = True


def row_of(task: Task) -> RowTree | None:
    """The row `task` is, with its own tree; None when it has no date to resolve as of."""
    env = task.environment
    if env is None or env.version_of is None or not env.as_of:
        return None
    return RowTree(task.id, task.repo_dir, env.as_of, isolated_build(task.install_cmd))


def isolated_build(install_cmd: str | None) -> bool:
    """Whether the install command lets pip build the project in an isolated environment (its build
    requirements then come from the wheelhouse)."""
    return "--no-build-isolation" not in (install_cmd or "")


def unmet(lock: Lock, env: Environment, root: Path, *, own: str | None = None, isolated: bool = True) -> list[str]:
    """The requirements (markers evaluated for the lock's interpreter and removed) that the project at
    `root` declares for its install, as the row's install reads them (its metadata with the extras the
    install command asks, after the recipe's pre-install edits; not the recipe's requirements files, which
    only the environment installs), and the lock does not satisfy: its installed distributions for the
    project's requirements, those or its build wheels for the build requirements (only for an `isolated`
    build). `own` (the project itself) and direct references are never unmet."""
    declared = read_declarations(root, extras=env.extras, any_requirements_file=False, edits=env.pre_install).texts()
    installed = [*lock.toolchain, *lock.packages]
    build = build_requires(root) if isolated else []
    return sorted({*_not_met(declared, installed, lock.key.python, own),
                   *_not_met(build, [*installed, *lock.build_only], lock.key.python, own)})


def _not_met(requirements: Sequence[str], have: Sequence[LockedFile], python: str, own: str | None) -> list[str]:
    versions: dict[str, list[str]] = {}
    for locked in have:
        versions.setdefault(canonicalize_name(locked.name), []).append(locked.version)
    target = target_environment(python)
    missing = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue                # the lock's own resolution reported it
        name = canonicalize_name(req.name)
        if req.url is not None or name == own or req.marker is not None and not req.marker.evaluate(target):
            continue
        if not any(req.specifier.contains(v, prereleases=True) for v in versions.get(name, [])):
            req.marker = None
            missing.append(str(req))
    return missing


def row_wheels(lock: Lock, env: Environment, rows: Sequence[RowTree], *, own: str | None = None,
               progress: Progress = quiet) -> tuple[tuple[RowFile, ...], tuple[str, ...]]:
    """The wheels `rows` need beyond `lock` (each with the rows that need it), and notes on what could not
    be carried (a requirement that does not resolve, a release with no wheel for the target).

    Raises:
        IndexUnreachable: the index could not be read (the network; never recorded in the lock).
        ResolveError: a resolved release's file is not on the index.
    """
    needed: dict[str, set[str]] = {}
    notes: list[str] = []
    for row in rows:
        missing = unmet(lock, env, row.root, own=own, isolated=row.isolated_build)
        if not missing:
            continue
        progress(f"{row.task_id}: its tree requires {missing} beyond the lock; resolving them as of "
                 f"{row_date(row.as_of, lock.key.python)}")
        try:
            pins, sdists = _extra_pins(lock, missing, row.as_of, own, progress)
        except IndexUnreachable:
            raise
        except ResolveError as exc:
            notes.append(f"{row.task_id}: its tree's {missing} do not resolve as of "
                         f"{row_date(row.as_of, lock.key.python)}; not carried: "
                         f"{exc.said or exc}"[:600])
            continue
        if sdists:
            notes.append(f"{row.task_id}: {sdists} (required by its tree) have no wheel for Python "
                         f"{lock.key.python}; not carried")
        for pin in pins:
            needed.setdefault(pin, set()).add(row.task_id)
    files = locked_files(sorted(needed), lock.key.python)
    return tuple(RowFile(**asdict(f), rows=tuple(sorted(needed[f.pin()]))) for f in files), tuple(notes)


def with_row_wheels(lock: Lock, env: Environment, rows: Sequence[RowTree], *, own: str | None = None,
                    progress: Progress = quiet) -> Lock:
    """`lock` with the wheels `rows` need beyond it (replacing the ones it carried) and the notes of
    `row_wheels` added to its outcome; its packages, toolchain and inputs are not changed.

    Raises:
        IndexUnreachable, ResolveError: see `row_wheels`.
    """
    files, notes = row_wheels(lock, env, rows, own=own, progress=progress)
    outcome = dataclasses.replace(lock.outcome, notes=(*lock.outcome.notes,
                                                       *(n for n in notes if n not in lock.outcome.notes)))
    return dataclasses.replace(lock, row_wheels=files, outcome=outcome)


def _extra_pins(lock: Lock, missing: list[str], as_of: str, own: str | None,
                progress: Progress) -> tuple[list[str], list[str]]:
    """The pins (normalised "name==version") `missing` resolves to that the lock does not hold: those with
    a wheel for the target, and those without; resolved beside the lock's installed pins, else alone, as of
    `as_of` or the interpreter's first usable date (`TOOLCHAIN_FLOOR`), whichever is later.

    Raises:
        ResolveError: neither resolves.
    """
    names = {canonicalize_name(Requirement(m).name) for m in missing}
    held = [f"{f.name}=={f.version}" for f in (*lock.toolchain, *lock.packages) if f.name not in names]

    def resolved(requirements: list[str]) -> Resolution:
        return resolve(requirements, lock.key.python, row_date(as_of, lock.key.python), forward=lock.outcome.forward,
                       leave_out=lock.outcome.left_out, progress=progress)

    try:
        result = resolved([*missing, *held])
    except IndexUnreachable:
        raise
    except ResolveError:
        progress(f"{missing} do not resolve beside the lock's packages as of {as_of}: resolving them alone, as "
                 "pip online would replace what they exclude")
        result = resolved(missing)
    have = {tuple(split_pin(p)) for p in held} | {(f.name, f.version) for f in lock.toolchain}
    extra = ["==".join(split_pin(p)) for p in result.pins
             if tuple(split_pin(p)) not in have and split_pin(p)[0] != own]
    built = {f"{canonicalize_name(s.name)}=={s.version}" for s in result.sdist_only}   # the lock's sdists are held
    return [p for p in extra if p not in built], [p for p in extra if p in built]


def row_date(as_of: str, python: str) -> str:
    """The instant a row's own requirements are resolved as of: its date, or the first date at which `python`
    was usable (`TOOLCHAIN_FLOOR`), whichever is later. A release older than the interpreter may not run on
    it (pytest-5413 of June 2019 requires importlib-metadata>=0.12, whose 0.18 of then fails at import on
    Python 3.9), and the official harness's online install took releases newer still: those of its image
    build."""
    return max(exclude_newer(as_of), exclude_newer(TOOLCHAIN_FLOOR.get(python, "2021-01-01")))


def declaration_tree(clone: Path, commit: str, dest: Path) -> Path:
    """The files of `commit` in the git clone `clone` that a project's install requirements are read from
    (`setup.py`, `setup.cfg`, `pyproject.toml` and every `*.txt`, which they may name) written under
    `dest`, which is returned; the rest of the tree is not needed to read what a row requires.

    Raises:
        TaskError: the clone does not hold `commit`, or the files are larger than MAX_DECLARATION_BYTES.
    """
    commit = checks.commit(commit, f"git clone {clone}")
    listed = hostgit.in_repository(clone, ["ls-tree", "-r", "-z", "--name-only", "--end-of-options", commit])
    if listed.returncode != 0:
        raise TaskError(f"git clone {clone} does not hold commit {commit}: "
                        f"{listed.stderr.decode(errors='replace').strip()}")
    wanted = [p for p in listed.stdout.decode(errors="replace").split("\0")
              if p and (p in DECLARATION_FILES or p.endswith(".txt"))]
    dest.mkdir(parents=True, exist_ok=True)
    if not wanted:
        return dest
    archive = hostgit.in_repository(clone, ["archive", "--format=tar", "--end-of-options", commit, *wanted],
                                    env={"GIT_LITERAL_PATHSPECS": "1"})
    if archive.returncode != 0 or len(archive.stdout) > MAX_DECLARATION_BYTES:
        raise TaskError(f"the declaration files of {commit} in {clone} could not be read "
                        f"({len(archive.stdout)} bytes): {archive.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        for member in tar.getmembers():
            if member.isfile():
                target = checks.child(dest, member.name)
                target.parent.mkdir(parents=True, exist_ok=True)
                handle = tar.extractfile(member)
                assert handle is not None
                target.write_bytes(handle.read())
    return dest

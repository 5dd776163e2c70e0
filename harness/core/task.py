"""Repair tasks: a directory with the project's files, a problem statement and how to test it.

Layout of a task directory::

    tasks/<id>/
      task.json      {"id", "python", "test_cmd", "FAIL_TO_PASS", "PASS_TO_PASS", "requirements",
                      "install_cmd"}
      problem.md     the problem statement, as a user would report it
      repo/          the project's files at the base state (or repo.tar.gz: the same as a tarball,
                     possibly under one top folder)
      gold.patch     optional: a reference fix (unified diff against repo/)
      test.patch     optional: tests applied at grading time only (the agent never sees them)

`requirements` are pinned pip requirements (``name==version``, markers allowed) of the project's
environment, the project itself excluded; `install_cmd` (optional) installs the project into that
environment, run in its root, e.g. ``pip install --no-deps --no-build-isolation -e .``.
`check_task` lists every problem of a directory at once; `load_task` refuses a directory that has any.
Every file of a task directory is read through `checks.read_beneath` and repo/ is looked at with
`checks.lstat_beneath`: a link there (task.json to ~/.aws/credentials, repo/ to the operator's home) is a
problem of the task, never followed.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import checks
from harness.core.sources import check_patch, task_repo_dir
from harness.errors import TaskError, UnsafePathError

TASK_KEYS = {"id", "python", "test_cmd", "FAIL_TO_PASS", "PASS_TO_PASS", "requirements", "install_cmd",
             "repo", "base_commit", "created_at", "version"}
_PYTHON = re.compile(r"3\.\d{1,2}")
TASK_EXAMPLE = ('{"id": "wordcount", "python": "3.11", "test_cmd": "python -m pytest -rA -q", '
                '"FAIL_TO_PASS": ["tests/test_core.py::test_top_words_returns_n_items"], '
                '"PASS_TO_PASS": ["tests/test_core.py::test_count_words_ignores_case"], '
                '"requirements": ["pytest==8.3.5"]}')


@dataclass(frozen=True)
class Environment:
    """How a task's environment is made: an isolated interpreter environment (a venv) whose dependencies
    are resolved once into a lock, from the project's own declarations plus `pins` (SWE-bench rows of the
    specification table) or from the task's own `requirements` (a row or task that brings them), with no
    release newer than the version's date, and shared by every task of that lock.

    The values come from a specification table (`harness.evaluation.specs`) or the row itself; the
    environment builder (`harness.environments`) reads only this.
    """

    key: str                                   # tasks with one key share one environment, e.g. "django/django 3.0"
    python_requested: str                      # what the project's specification asks for ("3.6")
    pins: tuple[str, ...] = ()                 # requirements the specification pins ("pytest==7.1.2")
    package_files: tuple[str, ...] = ()        # the project's requirement files to read, first found wins
    as_of: str | None = None                   # ISO date: resolve releases published up to then
    pre_install: tuple[str, ...] = ()          # shell commands run in the project before the install
    apt_packages: tuple[str, ...] = ()         # Debian packages the official recipe adds (not offline)
    compiled: bool = False                     # the install compiles extensions (needs a C toolchain)
    offline_blocker: str | None = None         # why the official recipe cannot be followed offline, if so
    extras: tuple[str, ...] = ()               # the project's extras the install asks for (`.[dev]`)
    cpus: int | None = None                    # CPUs the tests are graded with (pylint skips tests on one)
    test_env: tuple[tuple[str, str], ...] = ()  # environment variables the tests run with
    requirements: tuple[str, ...] = ()         # when given: the project's requirements, its files not read
    any_requirements_file: bool = True         # False: of requirement files, only `package_files` (as the
                                               # official SWE-bench recipes, which never read the others)
    version_of: tuple[str, str] | None = None  # (repo, version): one lock per version and interpreter, made
                                               # as of the version's date; None: a lock per recipe content
    setup_commit: str | None = None            # the version's environment_setup_commit (its date, its tree)
    git_source: Path | None = None             # a git clone that may hold `setup_commit`


def own_environment(requirements: tuple[str, ...], python: str, install_cmd: str,
                    created_at: object = None) -> Environment | None:
    """The environment of a task that brings its own pinned `requirements` and installs its project
    (`install_cmd`): a venv like a spec row's, its lock resolved as of the task's `created_at` (else the day
    it is made) from the project's declared requirements (and the extras the install asks of it), with
    the task's pins winning over any other range. None when a requirement is a direct reference (a wheel
    URL): such a task is built the pinned way (`harness.environments.pinned_image`)."""
    if any("@" in r.split(";", 1)[0] for r in requirements):
        return None
    as_of = str(created_at)[:10] if isinstance(created_at, str) and created_at.strip() else None
    return Environment(key=f"own requirements py{python}", python_requested=python, pins=requirements,
                       as_of=as_of, any_requirements_file=False, extras=install_extras(install_cmd))


def install_extras(install: str) -> tuple[str, ...]:
    """The extras an install command asks of the project itself: `pip install -e .[test]` -> ("test",)."""
    found = re.findall(r"(?<![\w/])\.\[([A-Za-z0-9_.,-]+)\]", install)
    return tuple(sorted({e.strip() for group in found for e in group.split(",") if e.strip()}))


@dataclass(frozen=True)
class Task:
    id: str
    problem_statement: str
    repo_dir: Path
    test_cmd: str | None = None
    python: str = "3.11"
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()
    install_cmd: str | None = None
    gold_patch: str | None = None
    test_patch: str | None = None
    extra: dict[str, object] = field(default_factory=dict)
    environment: Environment | None = None     # None: `requirements` and `install_cmd` say it all
    log_parser: str = "pytest"                 # how the test output is read (harness.evaluation.log_parsers)


def check_meta(meta: Any, where: str, id_field: str = "id") -> list[str]:
    """Every problem of a task's metadata (task.json or a SWE-bench instance, whose `instance_id` is
    `id_field`), as readable lines."""
    if not isinstance(meta, dict):
        return [f"{where} must be a JSON object like {TASK_EXAMPLE}, got {type(meta).__name__}"]
    problems = []
    unknown = sorted(set(meta) - TASK_KEYS)
    if unknown:
        problems.append(f"{where}: unknown key(s) {unknown}; known keys are {sorted(TASK_KEYS)}")
    if "id" in meta:
        try:
            checks.identifier(meta["id"], where, id_field)
        except TaskError as exc:
            problems.append(str(exc))
    python = meta.get("python", "3.11")
    if not (isinstance(python, str) and _PYTHON.fullmatch(python)):
        problems.append(f"{where}: python must be a version string like \"3.11\", got {python!r}")
    if not (isinstance(meta.get("test_cmd"), str) and meta["test_cmd"].strip()):
        problems.append(f"{where}: test_cmd is required: the command that runs the tests in the project "
                        f"root with pytest -rA output, got {meta.get('test_cmd')!r}; example: "
                        "\"python -m pytest -rA -q\"")
    problems += _check_test_ids(meta, where)
    problems += _check_requirements(meta.get("requirements", []), where)
    if meta.get("install_cmd") is not None and not isinstance(meta["install_cmd"], str):
        problems.append(f"{where}: install_cmd must be a string or null, got {meta['install_cmd']!r}; "
                        "example: \"pip install --no-deps --no-build-isolation -e .\"")
    return problems


def _check_test_ids(meta: dict[str, Any], where: str) -> list[str]:
    problems = []
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        value = meta.get(key, [])
        if not (isinstance(value, list) and all(isinstance(t, str) and t.strip() for t in value)):
            problems.append(f"{where}: {key} must be a list of pytest node ids, got {value!r}; example: "
                            "[\"tests/test_core.py::test_top_words_returns_n_items\"]")
    if not meta.get("FAIL_TO_PASS"):
        problems.append(f"{where}: FAIL_TO_PASS is empty; a task needs at least one test that fails "
                        "before the fix and passes after it")
    return problems


def _check_requirements(reqs: Any, where: str) -> list[str]:
    """Each requirement through `checks.requirement`, the one rule for task.json and instance rows.
    A direct reference to a wheel passes here; building it needs `harness eval --allow-direct-references`."""
    if not isinstance(reqs, list):
        return [f"{where}: requirements must be a list of pinned pip requirements, got {reqs!r}; "
                "example: [\"pytest==8.3.5\"]"]
    problems = []
    for req in reqs:
        try:
            checks.requirement(req, where, direct_references=True)
        except TaskError as exc:
            problems.append(str(exc))
    return problems


def _kind(path: Path, name: str) -> str:
    """What `path/name` is, without following a link: "file", "folder", "link", "other" or "absent"."""
    try:
        mode = checks.lstat_beneath(path, name).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "absent"
    except checks.LinkInPath:
        return "link"
    if stat.S_ISLNK(mode):
        return "link"
    return "file" if stat.S_ISREG(mode) else "folder" if stat.S_ISDIR(mode) else "other"


def _read(path: Path, name: str) -> str | None:
    """The text of the task file `path/name`, None when it is missing.

    Raises:
        TaskError: it is a link (never followed), not a regular file, or not UTF-8.
    """
    try:
        data = checks.read_beneath(path, name)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except checks.LinkInPath as exc:
        raise TaskError(f"{path / name} is a symbolic link; the files of a task directory are never read "
                        f"through a link ({exc.why}): put the file itself there") from exc
    except (OSError, UnsafePathError) as exc:
        raise TaskError(f"{path / name} cannot be read as a task file: {exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path / name} is not UTF-8 text ({exc})") from exc


def check_task(path: Path, *, patches: bool = True) -> list[str]:
    """Every problem of the task directory `path` (empty when it is valid).

    With `patches`, also check that gold.patch and test.patch apply to the base state.
    """
    path = Path(path)
    meta_file = path / "task.json"
    try:
        text = _read(path, "task.json")
        statement = _read(path, "problem.md")
    except TaskError as exc:
        return [str(exc)]
    if text is None:
        return [f"{path} is not a task directory: {meta_file} is missing; a task directory holds "
                "task.json, problem.md and repo/ (see tasks/wordcount)"]
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as exc:
        return [f"{meta_file} is not valid JSON ({exc}); example: {TASK_EXAMPLE}"]
    problems = check_meta(meta, str(meta_file))
    if isinstance(meta, dict) and "id" not in meta:
        try:
            checks.identifier(path.name, str(path), "task folder name (the id when task.json has none)")
        except TaskError as exc:
            problems.append(str(exc))
    if statement is None or not statement.strip():
        problems.append(f"{path / 'problem.md'} is missing or empty: write the problem as a user would report it")
    repo, tarball = _kind(path, "repo"), _kind(path, "repo.tar.gz")
    if "link" in (repo, tarball):
        problems.append(f"{path / ('repo' if repo == 'link' else 'repo.tar.gz')} is a symbolic link; a task's "
                        "files are never read through a link: put the project's files there")
    elif repo != "folder" and tarball != "file":
        problems.append(f"{path} has neither repo/ nor repo.tar.gz: the project's files at the base state")
    elif patches and not problems:
        problems += _check_patches(path)
    return problems


def _check_patches(path: Path) -> list[str]:
    """gold.patch and test.patch must be unified diffs that apply to the base state (asked with
    `git apply --check` / `patch --dry-run`: nothing is written on the host)."""
    problems = []
    for name in ("test.patch", "gold.patch"):
        try:
            text = _read(path, name)
        except TaskError as exc:
            problems.append(str(exc))
            continue
        if text is None:
            continue
        outcome = check_patch(task_repo_dir(path), text)
        if not outcome.applied:
            problems.append(f"{path / name} does not apply to the base state: {outcome.output.strip()[-500:]}; "
                            "make it with `git diff` in a clean checkout of repo/")
    return problems


def load_task(path: Path) -> Task:
    """The task in directory `path`. Raises TaskError listing every problem of an invalid one."""
    path = Path(path)
    problems = check_task(path, patches=False)
    if problems:
        raise TaskError(f"task {path} is invalid:\n  - " + "\n  - ".join(problems))
    meta = json.loads(_read(path, "task.json") or "{}")
    return task_from_meta(meta, default_id=path.name, problem=_read(path, "problem.md") or "",
                          repo_dir=task_repo_dir(path), gold_patch=_read(path, "gold.patch"),
                          test_patch=_read(path, "test.patch"))


def task_from_meta(meta: dict[str, Any], *, default_id: str, problem: str, repo_dir: Path,
                   gold_patch: str | None, test_patch: str | None) -> Task:
    """The task of `meta` (checked by `check_meta`). One that installs its project (`install_cmd`) gets a
    venv environment of its own requirements (`own_environment`), as a spec row gets one of its recipe."""
    extra: dict[str, object] = {k: meta[k] for k in ("repo", "base_commit", "created_at", "version") if k in meta}
    python, requirements = str(meta.get("python", "3.11")), tuple(meta.get("requirements", ()))
    installs = isinstance(meta.get("install_cmd"), str) and bool(meta["install_cmd"].strip())
    return Task(id=str(meta.get("id", default_id)), problem_statement=problem, repo_dir=repo_dir,
                test_cmd=meta.get("test_cmd"), python=python, fail_to_pass=tuple(meta.get("FAIL_TO_PASS", ())),
                pass_to_pass=tuple(meta.get("PASS_TO_PASS", ())), requirements=requirements,
                install_cmd=meta.get("install_cmd"), gold_patch=gold_patch, test_patch=test_patch, extra=extra,
                environment=own_environment(requirements, python, meta["install_cmd"], meta.get("created_at"))
                if installs else None)


def find_task_dirs(paths: list[Path]) -> list[Path]:
    """Task directories among `paths`: each path is a task directory or a folder of them. A task
    directory inside a folder of them that is a link is refused, not followed."""
    found: list[Path] = []
    for p in map(Path, paths):
        if _kind(p, "task.json") != "absent":
            found.append(p)
        elif p.is_dir():
            for name in sorted(os.listdir(p)):
                kind = _kind(p, name)
                # only a stat through the link, to say why a task there is refused; nothing is read
                if kind == "link" and os.path.isfile(p / name / "task.json"):
                    raise TaskError(f"{p / name} is a symbolic link to a folder; task directories are never "
                                    f"reached through a link: pass the real folder, e.g. {os.path.realpath(p / name)}")
                if kind == "folder" and _kind(p / name, "task.json") != "absent":
                    found.append(p / name)
        else:
            raise TaskError(f"{p} is neither a task directory (with task.json) nor a folder of task "
                            "directories; example: tasks/ or tasks/wordcount")
    return found

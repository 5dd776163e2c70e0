"""Repair in place: a task made from an operator's own folder and a problem statement, and the record
that lets `harness apply` put the patch back safely.

    repo_task(root, problem, ...)   selects the project's files (`harness.core.project`), stages them
                                    into a private folder, and makes a Task whose environment is resolved
                                    from the project's own declarations (the machinery SWE-bench
                                    environments use), or from `requirements` when the operator gives them
    selection_lines(project)        what went in and what was left out, said to the operator
    write_base(run_dir, repo, patch)  base.json: the operator's folder, git HEAD, and the SHA-256 of every
                                    file the patch touches as it was when the run started (null: absent)
    task_meta, write_task_dir       `harness tasks new`: task.json from the tests' statuses at the start
    pinned_requirements             and the resolved environment's exact pins

The operator's folder is only read. The staged copy is what the sandbox receives and what the patch is
computed against; it is removed by the caller when the run is over.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness import checks
from harness.core import hostgit
from harness.core.apply import patch_paths
from harness.core.project import ProjectFiles, select_files, stage
from harness.core.sources import cache_dir
from harness.core.task import Environment, Task
from harness.environments import read_declarations, resolved_pins
from harness.errors import TaskError
from sandbox.api import Progress, quiet

BASE_FILE = "base.json"
BASE_VERSION = 1
TEST_EXTRAS = ("test", "tests", "testing", "dev")
"""Optional-dependency groups read from the project's declarations: what its own CI installs to test."""
INSTALL = "python -m pip install -e ."
"""How the project itself is installed into its environment (offline, from the environment's wheels)."""
TASK_INSTALL = "python -m pip install --no-deps --no-build-isolation -e ."
"""The same in a task directory's environment, whose build tools are among its pinned requirements."""


@dataclass
class RepoTask:
    """A task made from an operator's folder: the task, what went in and what was left out, and the
    staged copy the sandbox receives (remove it with `cleanup` when the run is over)."""

    task: Task
    project: ProjectFiles
    staged: Path
    head: str | None

    def cleanup(self) -> None:
        checks.remove_tree(self.staged.parent, cache_dir() / "staged")


def read_problem(text: str | None, file: Path | None) -> str:
    """The problem statement from `--problem TEXT` or `--problem-file FILE` (exactly one).

    Raises:
        TaskError: neither or both were given, the file cannot be read, or the statement is empty.
    """
    if (text is None) == (file is None):
        raise TaskError("give the problem exactly once: --problem TEXT or --problem-file FILE, e.g. "
                        "harness run --repo ~/code/shop --problem-file bug.md")
    if file is not None:
        try:
            text = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TaskError(f"--problem-file {str(file)!r} could not be read as UTF-8 text: {exc}; pass a "
                            "file holding the bug report, e.g. --problem-file bug.md") from exc
    assert text is not None
    if not text.strip():
        raise TaskError("the problem statement is empty; say what is wrong, e.g. --problem \"total() ignores "
                        "the discount\"")
    return text


def task_id(root: Path) -> str:
    """A task id from the folder's name: its letters, digits, '_', '.' and '-' (else 'repo')."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", root.resolve().name).strip(".-")[:60]
    return name or "repo"


def repo_task(root: Path, problem: str, *, test_cmd: str | None = None, python: str = "3.11",
              include: tuple[str, ...] = (), requirements: Path | None = None) -> RepoTask:
    """Select and stage the project at `root` and make its task (see the module's docstring).

    Raises:
        TaskError: the folder, the selection (over a cap), or the requirements file is not usable.
    """
    if not re.fullmatch(r"3\.\d{1,2}", python):
        raise TaskError(f"--python {python!r} is not a Python version; expected 3.X, e.g. --python 3.11")
    project = select_files(root, include)
    pinned = _requirements_file(requirements) if requirements is not None else ()
    staged_root = checks.private_dir(cache_dir() / "staged")
    staged = stage(project, Path(tempfile.mkdtemp(prefix="run-", dir=staged_root)) / "repo")
    ident = task_id(project.root)
    environment, install = _environment(staged, ident, python, test_cmd, pinned)
    task = Task(id=ident, problem_statement=problem, repo_dir=staged, test_cmd=test_cmd, python=python,
                install_cmd=install, environment=environment,
                extra={"repo_path": str(project.root), "selection": project.mode})
    return RepoTask(task, project, staged, _git_head(project.root) if project.mode == "git" else None)


def selection_lines(project: ProjectFiles) -> list[str]:
    """What went into the sandbox and what was left out, as lines for the operator (escape them to print)."""
    kind = "the files git tracks or would track" if project.mode == "git" else "a folder"
    lines = [f"{project.root}: {len(project.files)} file(s), {project.total_bytes} bytes go in ({kind})"]
    secrets = project.secrets_told()
    if secrets:
        lines.append(f"left out as secrets ({len(secrets)}): {', '.join(secrets[:20])}"
                     f"{' ...' if len(secrets) > 20 else ''}; put one back with --include PATH")
    others = [item for item in project.left_out if item.why != "looks like a secret"]
    lines += [f"left out: {item.path}: {item.why}" for item in others[:10]]
    return lines


def _requirements_file(path: Path) -> tuple[str, ...]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"--requirements {str(path)!r} could not be read: {exc}; pass a requirements file, "
                        "e.g. --requirements requirements-dev.txt") from exc
    found = []
    for number, raw in enumerate(lines, 1):
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            found.append(checks.requirement(line, f"--requirements {path} line {number}", pinned=False))
    return tuple(found)


def _environment(staged: Path, ident: str, python: str, test_cmd: str | None,
                 requirements: tuple[str, ...]) -> tuple[Environment | None, str | None]:
    """The recipe of the project's environment and its install step; (None, None) when it declares
    nothing, has nothing to install and runs no pytest (the plain sandbox image serves)."""
    installable = (staged / "setup.py").is_file() or (staged / "pyproject.toml").is_file()
    declared = requirements or tuple(read_declarations(staged, extras=TEST_EXTRAS).texts())
    wants_pytest = bool(test_cmd and re.search(r"\bpytest\b", test_cmd))
    has_pytest = any(re.match(r"\s*pytest\b", r, re.IGNORECASE) for r in declared)
    extra = ("pytest",) if wants_pytest and not has_pytest else ()
    if not installable and not declared and not extra:
        return None, None
    environment = Environment(key=f"repo {ident}", python_requested=python, requirements=(*declared, *extra))
    return environment, INSTALL if installable else None


def _git_head(root: Path) -> str | None:
    proc = hostgit.in_repository(root, ["rev-parse", "--verify", "-q", "HEAD^{commit}"])
    head = proc.stdout.decode("ascii", "replace").strip()
    return head if proc.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", head) else None


def write_base(run_dir: Path, repo: RepoTask, patch: str) -> Path:
    """Write `run_dir`/base.json for `harness apply`: the folder, git HEAD, and each touched file's
    SHA-256 at the start (null when the patch creates it). Returns its path.

    Raises:
        TaskError: the patch touches a path `harness apply` refuses (a path out of the folder).
        UnsafePathError: a touched path crosses a link in the staged copy (`checks.read_beneath`).
    """
    files: dict[str, str | None] = {}
    for rel in patch_paths(patch) if patch.strip() else []:
        try:
            files[rel] = hashlib.sha256(checks.read_beneath(repo.staged, rel)).hexdigest()
        except (FileNotFoundError, NotADirectoryError):
            files[rel] = None                        # the patch creates it
    record = {"version": BASE_VERSION, "repo": str(repo.project.root), "mode": repo.project.mode,
              "head": repo.head, "files": files}
    path = Path(run_dir) / BASE_FILE
    checks.write_file(path, json.dumps(record, indent=2) + "\n")
    return path


@dataclass(frozen=True)
class NewTask:
    """A task directory written by `new_task_dir`: where, and the tests it names."""

    path: Path
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    requirements: tuple[str, ...]


def task_meta(repo: RepoTask, statuses: dict[str, str], fail_to_pass: tuple[str, ...],
              requirements: tuple[str, ...]) -> dict[str, object]:
    """task.json for `repo` from the test statuses at the starting state: the failing tests (or the
    `fail_to_pass` named, which must be among them) are FAIL_TO_PASS, the passing ones PASS_TO_PASS.

    Raises:
        TaskError: the output named no test, no test fails, or a named test does not fail.
    """
    task = repo.task
    if not statuses:
        raise TaskError(f"the test command {task.test_cmd!r} named no test in its output; the harness reads "
                        "pytest's summary lines, e.g. --test-cmd 'python -m pytest -rA -q'")
    failing = tuple(sorted(t for t, s in statuses.items() if s in ("FAILED", "ERROR")))
    passing = tuple(sorted(t for t, s in statuses.items() if s in ("PASSED", "XFAIL")))
    if fail_to_pass:
        wrong = [t for t in fail_to_pass if t not in failing]
        if wrong:
            raise TaskError(f"--fail-to-pass {wrong} do not fail at the starting state; failing now: "
                            f"{list(failing)[:10] or 'none'}")
        failing = tuple(fail_to_pass)
    if not failing:
        raise TaskError(f"no test fails at the starting state ({len(passing)} pass); a task needs a test that "
                        "shows the bug: add one to the project, then run `harness tasks new` again")
    meta: dict[str, object] = {"id": task.id, "python": task.python, "test_cmd": task.test_cmd,
                               "FAIL_TO_PASS": list(failing), "PASS_TO_PASS": list(passing),
                               "requirements": list(requirements)}
    if task.install_cmd:
        meta["install_cmd"] = TASK_INSTALL
    return meta


def write_task_dir(repo: RepoTask, out: Path, meta: dict[str, object]) -> NewTask:
    """Write the task directory `out` (which must not exist): task.json, problem.md and repo/ (the
    selected files). Returns what was written.

    Raises:
        TaskError: `out` exists.
    """
    out = Path(out)
    if out.exists() or out.is_symlink():
        raise TaskError(f"--out {str(out)!r} already exists; name a new folder, e.g. --out tasks/shop-total")
    out.mkdir(parents=True)
    stage(repo.project, out / "repo")
    checks.write_file(out / "task.json", json.dumps(meta, indent=2) + "\n", mode=0o644)
    checks.write_file(out / "problem.md", repo.task.problem_statement.rstrip("\n") + "\n", mode=0o644)
    def names(key: str) -> tuple[str, ...]:
        value = meta[key]
        return tuple(str(v) for v in value) if isinstance(value, list) else ()

    return NewTask(out, names("FAIL_TO_PASS"), names("PASS_TO_PASS"), names("requirements"))


def pinned_requirements(task: Task, progress: Progress = quiet) -> list[str]:
    """The exact pins of `task`'s resolved environment, for a task.json (with setuptools and wheel of
    the resolution when the project is installed: its install runs without build isolation).

    Raises:
        TaskError: a dependency has only a source release for this Python (a task directory's
            environment installs wheels only).
        EnvironmentUnsupported: the dependencies do not resolve.
    """
    if task.environment is None:
        return []
    pins, sdists, toolchain = resolved_pins(task, task.environment, progress)
    if sdists:
        raise TaskError(f"{', '.join(f'{s.name}=={s.version}' for s in sdists)} only have source releases for "
                        f"Python {task.python}; a task directory installs wheels only: run the repository in "
                        "place with `harness run --repo` instead, or try another --python")
    build_tools = [p for p in toolchain if not p.lower().startswith("pip=")] if task.install_cmd else []
    return sorted([*pins, *build_tools])

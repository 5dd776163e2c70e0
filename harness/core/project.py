"""Which of an operator's files go into the sandbox when the harness repairs a repository in place.

Only the project's files go in, as the operator sees them:

- in a git checkout, the files git tracks plus the untracked files it does not ignore (uncommitted
  changes included, deleted files left out), from `git ls-files`;
- outside git, every file except the usual caches, environments and build outputs (`SKIP_DIRS`, and
  any folder holding a `pyvenv.cfg`, whatever its name);
- in both, secrets are left out unless an `include` pattern names them: files that hold secrets by what
  they are (`.env`, keys, kubeconfig, `.pgpass`, Terraform state...; `harness.core.secret_names`) and
  files of any name whose content holds one (a private key, a cloud or GitHub token, a Slack webhook...;
  `harness.core.secret_scan`), each with its rule (and line); symbolic links that lead out of the
  project are left out;
- caps on file count and total size, refused with the biggest offenders named.

`select_files` only reads; `stage` copies a selection into a fresh folder that the sandbox is then
given, never following a link and never writing outside that folder. The operator's checkout is never
modified here.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import shutil
import stat
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from harness import checks
from harness.core import hostgit, secret_scan
from harness.core.secret_names import name_rule
from harness.core.sources import MAX_SOURCE_BYTES, MAX_SOURCE_FILES
from harness.errors import TaskError

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis",
    ".venv", "venv", ".tox", ".nox", "node_modules", ".eggs", "build", "dist", "htmlcov", ".ipynb_checkpoints",
    ".cache", ".idea", ".vscode",
})
"""Folders left out of a project outside git: caches, environments, build outputs, editor state."""
SKIP_FILES = ("*.pyc", "*.pyo", ".coverage", ".coverage.*", ".DS_Store")
"""Files left out of a project outside git."""

SECRET = "looks like a secret"
"""`LeftOut.why` of every secret left out (its `rule` and `line` say which and where)."""


@dataclass(frozen=True)
class LeftOut:
    """A file of the project that did not go in, and why ("looks like a secret", ...); for a secret, the
    `rule` that found it (`name:...` for its name, a scanner rule id for its content) and the `line`
    of a content match (0 for a name). Never the secret itself."""

    path: str
    why: str
    rule: str = ""
    line: int = 0

    def told(self) -> str:
        """How the operator is told of a secret: `notes.txt (line 3: betterleaks.private-key)`."""
        return f"{self.path} ({f'line {self.line}: ' if self.line else ''}{self.rule})" if self.rule else self.path


@dataclass
class ProjectFiles:
    """What goes into the sandbox from `root`: `files` (relative POSIX paths, sorted), how they were
    chosen (`mode`: "git" or "folder"), what was left out and why, and the size of what goes in."""

    root: Path
    mode: str
    files: list[str]
    left_out: list[LeftOut] = field(default_factory=list)
    skipped_dirs: list[str] = field(default_factory=list)
    total_bytes: int = 0
    sizes: dict[str, int] = field(default_factory=dict, repr=False)
    stat_keys: dict[str, str] = field(default_factory=dict, repr=False)

    def secrets(self) -> list[str]:
        return [item.path for item in self.left_out if item.why == SECRET]

    def secrets_told(self) -> list[str]:
        """Each secret left out with its rule and line (`LeftOut.told`), for the operator."""
        return [item.told() for item in self.left_out if item.why == SECRET]


def looks_secret(path: str) -> bool:
    """Whether the relative path `path` names a file that holds secrets by what it is (its name or a
    folder on its path; `harness.core.secret_names`). Its content is judged by `select_files`."""
    return name_rule(path) is not None


def included(path: str, include: tuple[str, ...]) -> bool:
    """Whether an `--include` pattern names `path`: the relative path itself or a glob over it or over
    its file name (`config/.env`, `.env`, `*.pem`)."""
    name = PurePosixPath(path).name
    return any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(name, p) for p in include)


def select_files(root: Path, include: tuple[str, ...] = (), *, max_files: int = MAX_SOURCE_FILES,
                 max_bytes: int = MAX_SOURCE_BYTES) -> ProjectFiles:
    """The files of the project at `root` that go into the sandbox (see the module's docstring).

    Raises:
        TaskError: `root` is not a folder, git failed on a checkout, or the selection is over a cap
            (the message names the biggest folders and files).
    """
    root = Path(root)
    if not root.is_dir():
        raise TaskError(f"--repo {str(root)!r} is not a folder; pass the project's folder, a git checkout or "
                        "any folder of files, e.g. --repo ~/code/shop")
    root = root.resolve()
    listed = _git_files(root)
    project = ProjectFiles(root, "git", []) if listed is not None else ProjectFiles(root, "folder", [])
    candidates = listed if listed is not None else _folder_files(root, project)
    for rel in candidates:
        _consider(project, rel, include)
    project.files.sort()
    _check_caps(project, max_files, max_bytes)               # before the scan: a tree over a cap is refused at once
    _leave_out_secret_contents(project, include)
    return project


def _git_files(root: Path) -> list[str] | None:
    """The paths under `root` that git tracks or would track, or None when `root` is not in a checkout."""
    found = hostgit.find_checkout(root)
    if found is None or found.top is None:
        return None
    listed = hostgit.in_repository(root, ["-c", "core.quotePath=false", "ls-files", "-z", "--cached", "--others",
                                          "--exclude-standard", "--deduplicate"])
    if listed.returncode != 0:
        raise TaskError(f"git could not list the files of {str(root)!r}: "
                        f"{listed.stderr.decode('utf-8', 'replace').strip()[:500]}")
    return [p for p in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def _folder_files(root: Path, project: ProjectFiles) -> list[str]:
    found = []
    for top, dirs, names in os.walk(root, followlinks=False):
        kept = []
        for d in sorted(dirs):
            full = os.path.join(top, d)
            rel = os.path.relpath(full, root)
            if os.path.islink(full):
                found.append(rel)                    # a link to a folder: judged as a link
            elif d in SKIP_DIRS or d.endswith(".egg-info") or os.path.isfile(os.path.join(full, "pyvenv.cfg")):
                project.skipped_dirs.append(rel)
            else:
                kept.append(d)
        dirs[:] = kept
        for name in sorted(names):
            if not any(fnmatch.fnmatchcase(name, p) for p in SKIP_FILES):
                found.append(os.path.relpath(os.path.join(top, name), root))
    return found


def _consider(project: ProjectFiles, rel: str, include: tuple[str, ...]) -> None:
    try:
        info = checks.lstat_beneath(project.root, rel)
    except (FileNotFoundError, NotADirectoryError):
        return                                       # tracked but deleted in the working tree
    except checks.LinkInPath as exc:
        project.left_out.append(LeftOut(rel, _link_reason(exc)))
        return
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        project.left_out.append(LeftOut(rel, "a git submodule (its files are not copied)"))
        return
    rule = name_rule(rel)
    if rule is not None and not included(rel, include):
        project.left_out.append(LeftOut(rel, SECRET, rule))
        return
    if stat.S_ISLNK(mode):
        if not _link_stays_inside(project.root, rel):
            project.left_out.append(LeftOut(rel, "a symbolic link that leads out of the project"))
            return
    elif not stat.S_ISREG(mode):
        project.left_out.append(LeftOut(rel, "not a regular file (a socket, fifo or device)"))
        return
    else:
        project.total_bytes += info.st_size
        project.sizes[rel] = info.st_size
        project.stat_keys[rel] = secret_scan.stat_key(info)
        secret_scan.expect(project.stat_keys[rel])   # the scanner's rules start loading at the first new file
    project.files.append(PurePosixPath(*Path(rel).parts).as_posix())


def _leave_out_secret_contents(project: ProjectFiles, include: tuple[str, ...]) -> None:
    """Scan the content of every selected regular file that no `include` pattern names; a file holding
    a secret, or that could not be scanned, leaves the selection with its rule and line (or why)."""
    scanned = [rel for rel in project.files if rel in project.stat_keys and not included(rel, include)]
    hits, unscannable = secret_scan.scan_files(project.root, [(rel, project.stat_keys[rel]) for rel in scanned])
    if not hits and not unscannable:
        return
    for rel in scanned:
        hit = hits.get(rel)
        if hit is not None:
            project.left_out.append(LeftOut(rel, SECRET, hit.rule, hit.line))
        elif rel in unscannable:
            project.left_out.append(LeftOut(rel, unscannable[rel]))
        else:
            continue
        project.files.remove(rel)
        project.total_bytes -= project.sizes.pop(rel, 0)
        project.stat_keys.pop(rel, None)


def _link_reason(exc: checks.LinkInPath) -> str:
    if exc.errno == errno.ELOOP:
        return f"a folder on its path ({exc.component}) is a symbolic link (never followed)"
    return f"not a plain path below the project ({exc.why})"


def _link_stays_inside(root: Path, rel: str) -> bool:
    target = checks.readlink_beneath(root, rel)
    if os.path.isabs(target):
        return False
    resolved = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    return resolved != ".." and not resolved.startswith("../") and resolved != "."


def _check_caps(project: ProjectFiles, max_files: int, max_bytes: int) -> None:
    if len(project.files) <= max_files and project.total_bytes <= max_bytes:
        return
    by_dir: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    sizes = []
    for rel in project.files:
        size = project.sizes.get(rel, 0)
        top = PurePosixPath(rel).parts[0] if "/" in rel else "."
        by_dir[top][0] += 1
        by_dir[top][1] += size
        sizes.append((size, rel))
    folders = sorted(by_dir.items(), key=lambda kv: (-kv[1][1], -kv[1][0]))[:5]
    biggest = sorted(sizes, reverse=True)[:5]
    raise TaskError(
        f"{project.root} has {len(project.files)} files and {project.total_bytes} bytes to copy, over the cap of "
        f"{max_files} files and {max_bytes} bytes. Biggest folders: "
        + ", ".join(f"{d} ({n} files, {b} bytes)" for d, (n, b) in folders)
        + "; biggest files: " + ", ".join(f"{rel} ({size} bytes)" for size, rel in biggest)
        + ". Add what should not go in to .gitignore (in a git checkout) or point --repo at the project's "
          "own folder, e.g. --repo ~/code/shop/backend")


def stage(project: ProjectFiles, dest: Path) -> Path:
    """Copy the selection into `dest` (which must not exist), never following a link; returns `dest`.

    Regular files keep their executable bit; links (already checked to stay inside) are recreated. Each
    file is read through `checks.open_beneath`: a folder on its path that became a link after the
    selection is refused, and the file moves to `project.left_out` with the reason.

    Raises:
        TaskError: `dest` exists, or a file changed into something else while it was copied.
    """
    dest = Path(dest)
    try:
        dest.mkdir(mode=0o700, parents=False)
    except FileExistsError:
        raise TaskError(f"the staging folder {dest} already exists; it must be new") from None
    source_fd = os.open(project.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    dest_fd = os.open(dest, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for rel in list(project.files):
            try:
                _stage_one(project, rel, source_fd, dest_fd)
            except checks.LinkInPath as exc:
                project.files.remove(rel)
                project.total_bytes -= project.sizes.pop(rel, 0)
                project.left_out.append(LeftOut(rel, _link_reason(exc) + ", found while copying"))
    finally:
        os.close(source_fd)
        os.close(dest_fd)
    return dest


def _stage_one(project: ProjectFiles, rel: str, source_fd: int, dest_fd: int) -> None:
    """Copy `rel` from the project (open at `source_fd`) into the staging folder (open at `dest_fd`)."""
    folder, _, name = rel.rpartition("/")
    if stat.S_ISLNK(checks.lstat_beneath(source_fd, rel).st_mode):
        target = checks.readlink_beneath(source_fd, rel)
        parent = checks.dir_beneath(dest_fd, folder, create=True)
        try:
            os.symlink(target, name, dir_fd=parent)
        finally:
            os.close(parent)
        return
    try:
        fd = checks.open_beneath(source_fd, rel, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise TaskError(f"{rel} in {project.root} could not be read while copying it: {exc}") from exc
    with os.fdopen(fd, "rb") as src:
        info = os.fstat(src.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise TaskError(f"{rel} in {project.root} changed into a non-file while it was being copied")
        mode = 0o755 if info.st_mode & 0o111 else 0o644
        parent = checks.dir_beneath(dest_fd, folder, create=True)
        try:
            out_fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                             dir_fd=parent)
        finally:
            os.close(parent)
        with os.fdopen(out_fd, "wb") as out:
            shutil.copyfileobj(src, out)
            os.fchmod(out.fileno(), mode)

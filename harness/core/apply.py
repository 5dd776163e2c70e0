"""Putting a run's patch back into the operator's folder (`harness apply RUN_DIR`).

    load_run(run_dir, repo)        the run's patch.diff and base.json, validated and cross-checked: the
                                   paths the patch touches (as unidiff and as `git apply` read them) are
                                   exactly base.json's `files`, each a plain relative path
    changes_since(run)             the touched files that no longer match base.json (empty: none)
    require_unchanged(run)         PatchConflict listing them, unless there are none
    apply_to_tree(run)             compare-and-swap: the touched files read into a private folder, `git
                                   apply` there, hashes checked again, the results written back
    check_branch(run, name)        for `--branch`: a checkout, a new valid branch name, and a recorded HEAD
                                   that holds the files as the run found them (else: uncommitted work)
    commit_to_branch(run, name)    a commit of the patch on top of the recorded HEAD, on a new branch;
                                   the working tree and the real index are not touched

Contract: nothing is written unless every check passed, and then only the files the patch touches
(`git apply` applies all of a patch or none of it). No path of the patch is followed through a symbolic
link, none may leave the folder, and nothing from the patch becomes a command-line option (the patch
goes to git on stdin). Every read and write in the folder goes through `checks.open_beneath` and
`checks.dir_beneath`: no component of a path is followed through a link, and no git runs in the folder
for `apply_to_tree` (it runs in a private copy of the touched files). For `--branch`, a folder inside a
git checkout is patched with `--directory=<its prefix>`: without it `git apply` run in a subfolder skips
every path silently and succeeds. base.json's own folder is used only when it is reached through no
link and (for a git run) holds the recorded HEAD commit; `--repo` names any other.

Raises `TaskError` for bad input (run folder, base.json, patch, branch name), `PatchConflict` (a
`TaskError` carrying `.changes`) when the folder or the commit no longer holds what the run started from,
and `UnsafePathError` when a run file is a link.

Over 400 lines because the checks of one untrusted input (base.json, the patch's paths, the folder's
files, the commit's blobs) are kept together with the two writes they guard.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast, get_args

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from harness import checks
from harness.core import hostgit
from harness.core.binary_patch import (
    SHOWN_BYTES,
    ZERO,
    BinaryChange,
    BinaryPatchError,
    Content,
    binary_changes,
    blob_id,
)
from harness.core.binary_patch import describe as describe_change
from harness.core.sources import GIT_IDENTITY
from harness.errors import TaskError, UnsafePathError

Mode = Literal["git", "folder"]
How = Literal["changed", "deleted", "now exists", "is a symbolic link", "is not a regular file"]

PATCH_FILE, BASE_FILE = "patch.diff", "base.json"
_RUN_HINT = ("RUN_DIR must be the --out folder of a `harness run --repo` run, e.g. harness apply "
             "runs/shop-20260101-120000")
_BASE_EXAMPLE = ('{"version": 1, "repo": "/home/me/code/shop", "mode": "git", "head": "<40 hex digits or '
                 'null>", "files": {"shop/cart.py": "<64 hex digits>", "shop/new.py": null}}')
_HEX40, _HEX64 = re.compile(r"[0-9a-f]{40}"), re.compile(r"[0-9a-f]{64}")
_ODD_MODE = re.compile(r"\b(120000|160000)\b")   # a symbolic link or a submodule in a git header line
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


class NothingToApply(TaskError):
    """The run changed nothing: its patch is empty and base.json lists no file. Not an error to the
    operator (`harness apply` says so and exits 0)."""


class PatchConflict(TaskError):
    """Refused: the folder (or the commit for `--branch`) does not hold what the run started from.
    `.changes` lists each file that differs and how (may be empty when git itself refused)."""

    def __init__(self, message: str, changes: tuple[FileChange, ...] = ()) -> None:
        super().__init__(message)
        self.changes = changes


@dataclass(frozen=True)
class FileChange:
    path: str
    how: How


@dataclass(frozen=True)
class RunRecord:
    """A run folder, validated: the folder to patch and what each touched file held at the start
    (`files[path]` is a SHA-256 hex digest, or None when the file did not exist)."""

    run_dir: Path
    repo: Path
    mode: Mode
    head: str | None
    files: dict[str, str | None]
    patch: str
    recorded: Path | None = None
    """The folder base.json names (`repo` is it unless `--repo` said otherwise)."""
    explicit: bool = False
    """Whether `repo` was named by the caller (`--repo`) rather than taken from base.json."""


@dataclass(frozen=True)
class Applied:
    """What `harness apply` did: the files written in `repo`, or the `branch` and `commit` made."""

    repo: Path
    files: tuple[str, ...]
    branch: str | None = None
    commit: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"applied": True, "repo": str(self.repo), "files": list(self.files),
                "where": "branch" if self.branch else "working tree", "branch": self.branch, "commit": self.commit}


@dataclass(frozen=True)
class _Place:
    """Where git runs for `repo`: the checkout's top folder and `repo`'s prefix in it ("" outside git)."""

    cwd: Path
    prefix: str
    in_git: bool

    def directory(self) -> list[str]:
        return [f"--directory={self.prefix}"] if self.prefix else []


def load_run(run_dir: Path, repo: Path | None = None) -> RunRecord:
    """The run in `run_dir`, to be applied to `repo` (default: the folder base.json names, which must
    be reached through no link and, for a git run, hold the recorded HEAD commit: a run folder from
    elsewhere cannot point `harness apply` at another repository).

    Raises:
        NothingToApply: the run changed nothing (empty patch, no file listed).
        TaskError: a run file is missing or malformed, the folder is not usable (or not a checkout of
            the run's repository), or the patch touches a path that is unsafe or not the set base.json lists.
        UnsafePathError: the run folder, a run file or the folder to patch is a symbolic link.
    """
    run_dir = Path(run_dir)
    if run_dir.is_symlink():
        raise UnsafePathError(f"refusing run folder {run_dir}: it is a symbolic link; pass the real folder "
                              f"({os.path.realpath(run_dir)})")
    if not run_dir.is_dir():
        raise TaskError(f"run folder {str(run_dir)!r} does not exist; {_RUN_HINT}")
    recorded, mode, head, files = _parse_base(_read_run_file(run_dir, BASE_FILE), run_dir / BASE_FILE)
    patch = _read_run_file(run_dir, PATCH_FILE)
    if not patch.strip() and not files:
        raise NothingToApply(f"nothing to apply: the run in {run_dir} changed nothing ({PATCH_FILE} is empty); "
                             f"{recorded} is unchanged")
    if not patch.strip():
        raise TaskError(f"{run_dir / PATCH_FILE} is empty but {run_dir / BASE_FILE} lists {sorted(files)}; "
                        f"both must come from the same `harness run --repo` run")
    target = Path(repo) if repo is not None else Path(recorded)
    if target.is_symlink():
        raise UnsafePathError(f"refusing folder {target}: it is a symbolic link; pass the real folder, e.g. "
                              f"--repo {os.path.realpath(target)}")
    if not target.is_dir():
        raise TaskError(f"the folder to patch {str(target)!r} does not exist or is not a folder; pass the "
                        "project's folder, e.g. harness apply RUN_DIR --repo ~/code/shop")
    if repo is None:
        _check_recorded(target, mode, head, run_dir)
    _cross_check(patch, files, run_dir)
    return RunRecord(run_dir, target.absolute(), mode, head, files, patch, Path(recorded), repo is not None)


def _check_recorded(target: Path, mode: Mode, head: str | None, run_dir: Path) -> None:
    """The folder base.json names is reached through no link and, for a git run with a HEAD, is a
    checkout holding that commit; anything else needs `--repo` to say so."""
    override = f"to apply there anyway, say so: harness apply {run_dir} --repo {target}"
    if os.path.realpath(target) != str(target):
        raise UnsafePathError(f"refusing {target} (named by {run_dir / BASE_FILE}): it is reached through a "
                              f"symbolic link (it resolves to {os.path.realpath(target)}); {override}")
    if mode != "git" or head is None:
        return
    place = _place(target)
    if not place.in_git:
        raise TaskError(f"refusing {target} (named by {run_dir / BASE_FILE}): the run started from commit "
                        f"{head[:12]} of a git checkout, and {target} is not a git checkout; {override}")
    if _rev(place.cwd, f"{head}^{{commit}}") is None:
        raise TaskError(f"refusing {target} (named by {run_dir / BASE_FILE}): the run started from commit "
                        f"{head[:12]}, which is not in {target}'s repository: it is a checkout of another "
                        f"project; {override}")


def _read_run_file(run_dir: Path, name: str) -> str:
    path = run_dir / name
    try:
        data = checks.read_beneath(run_dir, name)
    except FileNotFoundError:
        raise TaskError(f"{path} is missing; {_RUN_HINT}") from None
    except checks.LinkInPath as exc:
        raise UnsafePathError(f"refusing {path}: it is a symbolic link (run files are never followed)") from exc
    except UnsafePathError:
        raise TaskError(f"{path} is not a regular file; {_RUN_HINT}") from None
    except OSError as exc:
        raise TaskError(f"{path} could not be read: {exc}; {_RUN_HINT}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path} is not UTF-8 text ({exc}); {_RUN_HINT}") from exc


def _parse_base(text: str, where: Path) -> tuple[str, Mode, str | None, dict[str, str | None]]:
    """base.json's repo, mode, head and files, every violation reported at once."""
    try:
        base = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskError(f"{where} is not JSON ({exc}); expected e.g. {_BASE_EXAMPLE}") from exc
    if not isinstance(base, dict):
        raise TaskError(f"{where} holds {type(base).__name__}, not an object; expected e.g. {_BASE_EXAMPLE}")
    problems = [f"unknown key {k!r}" for k in sorted(set(base) - {"version", "repo", "mode", "head", "files"})]
    if base.get("version") != 1:
        problems.append(f"version is {base.get('version')!r}, expected 1")
    repo = base.get("repo")
    if not (isinstance(repo, str) and os.path.isabs(repo) and "\0" not in repo):
        problems.append(f"repo is {repo!r}, expected an absolute path")
    if base.get("mode") not in get_args(Mode):
        problems.append(f"mode is {base.get('mode')!r}, expected \"git\" or \"folder\"")
    head = base.get("head")
    if not (head is None or (isinstance(head, str) and _HEX40.fullmatch(head))):
        problems.append(f"head is {head!r}, expected 40 lowercase hex digits or null")
    files = base.get("files")
    if not isinstance(files, dict):
        problems.append(f"files is {files!r}, expected an object mapping each touched path to its SHA-256 or null")
    else:
        problems += [f"files[{k!r}] is {v!r}, expected 64 lowercase hex digits or null" for k, v in files.items()
                     if not (v is None or (isinstance(v, str) and _HEX64.fullmatch(v)))]
    if problems:
        raise TaskError(f"{where} is malformed: {'; '.join(problems)}. Expected e.g. {_BASE_EXAMPLE}")
    return cast(str, repo), cast(Mode, base["mode"]), cast("str | None", head), cast("dict[str, str | None]", files)


def _unquote(name: str) -> str:
    """A file name from a diff header, with git's C-style quoting ("a/\\303\\251.txt") undone."""
    if not (len(name) >= 2 and name.startswith('"') and name.endswith('"')):
        return name
    out, body, i = bytearray(), name[1:-1], 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8", "surrogateescape")
            i += 1
        elif body[i + 1:i + 4].isdigit() and len(body[i + 1:i + 4]) == 3:
            out.append(int(body[i + 1:i + 4], 8) & 0xFF)
            i += 4
        elif body[i + 1:i + 2] in _ESCAPES:
            out.append(_ESCAPES[body[i + 1]])
            i += 2
        else:
            raise TaskError(f"the patch names a file {name!r} with an unknown escape; expected git's quoting, "
                            "e.g. \"a/caf\\303\\251.py\"")
    return out.decode("utf-8", "surrogateescape")


def patch_paths(patch: str) -> list[str]:
    """The paths a unified diff touches (both sides of a rename), unquoted and without a/ b/, each
    checked to be a plain relative path; symbolic links and submodules in the patch are refused.

    Raises:
        TaskError: not a unified diff, or an unsafe path or file type (every offender listed).
    """
    try:
        parsed = PatchSet(patch)
    except UnidiffParseError as exc:
        raise TaskError(f"the patch is not a unified diff ({exc}); expected `diff --git a/x b/x` headers "
                        "followed by @@ hunks, as `git diff` writes them") from exc
    paths: list[str] = []
    problems: list[str] = []
    for item in parsed:
        if any(_ODD_MODE.search(line) for line in item.patch_info or ()):
            problems.append(f"{item.path!r} is a symbolic link or a submodule (only regular files are applied)")
        for name in (item.source_file, item.target_file):
            if name and name != "/dev/null":
                rel = _unquote(name)
                rel = rel[2:] if rel.startswith(("a/", "b/")) else rel
                why = _unsafe_path(rel)
                if why:
                    problems.append(f"{rel!r} {why}")
                elif rel not in paths:
                    paths.append(rel)
    if problems:
        raise TaskError(f"refusing the patch: {'; '.join(problems)}. Only relative paths inside the folder are "
                        "applied, e.g. \"shop/cart.py\"")
    if not paths:
        raise TaskError("the patch touches no file; expected `diff --git a/x b/x` headers followed by @@ hunks")
    return sorted(paths)


def _unsafe_path(rel: str) -> str | None:
    parts = rel.split("/")
    if rel.startswith("/") or os.path.isabs(rel):
        return "is absolute"
    if ".." in parts:
        return "climbs out with '..'"
    if rel.startswith("-"):
        return "starts with '-'"
    if any(p.lower() == ".git" for p in parts):
        return "is inside .git"
    if "" in parts or "." in parts or any(ord(c) < 32 or c == "\x7f" for c in rel):
        return "is not a plain path (empty or '.' component, or a control character)"
    return None


def _cross_check(patch: str, files: dict[str, str | None], run_dir: Path) -> None:
    """The patch's paths, as unidiff and as git read them, are exactly base.json's `files`."""
    paths = set(patch_paths(patch))
    listed = set(files)
    if paths != listed:
        raise TaskError(f"{run_dir / PATCH_FILE} and {run_dir / BASE_FILE} disagree: the patch touches "
                        f"{sorted(paths - listed)} that base.json does not list, and base.json lists "
                        f"{sorted(listed - paths)} that the patch does not touch; expected the same paths. "
                        f"Both must come from the same `harness run --repo` run")
    proc = hostgit.in_folder(Path(tempfile.gettempdir()), ["apply", "--numstat", "-z", "-"], stdin=patch.encode())
    if proc.returncode != 0:
        raise TaskError(f"git cannot read {run_dir / PATCH_FILE}: {_said(proc)}; expected a patch made by "
                        "`git diff` (`diff --git a/x b/x` headers followed by @@ hunks)")
    seen = [f.split("\t", 2)[2] for f in proc.stdout.decode("utf-8", "surrogateescape").split("\0")
            if f.count("\t") >= 2]
    entries = len(PatchSet(patch))
    if len(seen) != entries or not set(seen) <= paths:
        raise TaskError(f"git reads {run_dir / PATCH_FILE} differently ({len(seen)} file(s): {sorted(seen)}) "
                        f"than the diff parser ({entries} file(s): {sorted(paths)}); refusing an ambiguous patch")


def changes_since(run: RunRecord) -> tuple[FileChange, ...]:
    """Each touched file in `run.repo` that no longer holds what base.json recorded, and how."""
    found: list[FileChange] = []
    for rel, want in sorted(run.files.items()):
        kind, digest = _current(run.repo, rel)
        if _differs(kind, digest, want):
            found.append(FileChange(rel, _how(kind, want)))
    return tuple(found)


def _differs(kind: str, digest: str | None, want: str | None) -> bool:
    return kind in ("link", "other") or (want is None) != (kind == "absent") or digest != want


def _current(root: Path | int, rel: str) -> tuple[Literal["file", "absent", "link", "other"], str | None]:
    """What is at `root/rel` now, never following a link on the way (`checks.open_beneath`): a file and
    its SHA-256, nothing, a symbolic link (there or on a folder above), or something else."""
    digest, _ = _read_current(root, rel)
    return digest


def _read_current(root: Path | int, rel: str) -> tuple[tuple[Literal["file", "absent", "link", "other"],
                                                              str | None], tuple[bytes, int] | None]:
    """`_current` and, for a file, its bytes and permission bits."""
    try:
        fd = checks.open_beneath(root, rel, os.O_RDONLY | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return ("absent", None), None
    except checks.LinkInPath:
        return ("link", None), None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            return ("other", None), None
        data = f.read()
    return ("file", hashlib.sha256(data).hexdigest()), (data, stat.S_IMODE(info.st_mode))


def require_unchanged(run: RunRecord) -> None:
    """Raise `PatchConflict` (listing each file and how) unless every touched file is as recorded."""
    changes = changes_since(run)
    if not changes:
        return
    listed = ", ".join(f"{c.path} ({c.how})" for c in changes)
    raise PatchConflict(f"refusing to apply: {len(changes)} file(s) in {run.repo} changed since the run "
                         f"started: {listed}. Nothing was written. Look at what changed, then start a new run "
                         f"(harness run --repo {run.repo} ...) or apply the patch by hand "
                         f"(git apply {run.run_dir / PATCH_FILE})", changes)


def apply_to_tree(run: RunRecord) -> Applied:
    """Write the patch into `run.repo`'s files: the touched files are read (no link followed, each hash
    checked) into a private folder, `git apply` runs there, then the hashes are checked once more and
    each result is written back through `checks.dir_beneath` (a new file renamed over the old one; a
    deleted one unlinked). No git runs in the operator's folder, and no write follows a link.

    Raises:
        PatchConflict: a touched file changed since the run, or git refused the patch (nothing written).
    """
    root = os.open(run.repo, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with tempfile.TemporaryDirectory(prefix="harness-apply-") as tmp:
            work = Path(tmp) / "tree"
            work.mkdir()
            _copy_touched(run, root, work)
            done = hostgit.in_folder(work, ["apply", "--whitespace=nowarn", "-"], stdin=run.patch.encode())
            if done.returncode != 0:
                raise PatchConflict(f"refusing to apply: `git apply` refused the patch for {run.repo}: "
                                    f"{_said(done)}. Nothing was written; apply it by hand to see why "
                                    f"(git apply --reject {run.run_dir / PATCH_FILE})")
            require_unchanged(run)
            for rel in sorted(run.files):
                _write_back(root, rel, work, run.files[rel] is not None)
    finally:
        os.close(root)
    return Applied(run.repo, tuple(sorted(run.files)))


def binary_files(run: RunRecord) -> list[BinaryChange]:
    """The files the run's patch changes as binary to git (their diff is encoded data, not text).

    Raises:
        TaskError: such a change names no full blob ids, so what it writes cannot be shown.
    """
    try:
        return binary_changes(run.patch)
    except BinaryPatchError as exc:
        raise TaskError(f"refusing to apply: {exc} ({run.run_dir / PATCH_FILE}); nothing was written") from None


def describe_binary(run: RunRecord, changes: list[BinaryChange], head: str | None = None) -> list[str]:
    """What each binary change of the run's patch writes, for the operator to judge before it is applied:
    the patch is applied to a private copy of the files the run started from (the folder's, checked
    against base.json, else commit `head`'s), and both sides of each change are read there by the blob
    ids the patch names, so the text shown (escaped) is exactly what would be written.

    Raises:
        PatchConflict: the starting files cannot be had, or the patch does not apply to them.
    """
    with tempfile.TemporaryDirectory(prefix="harness-apply-binary-") as tmp:
        work = Path(tmp) / "tree"
        work.mkdir()
        _copy_start(run, work, head)
        before = _blobs(work)
        done = hostgit.in_folder(work, ["apply", "--whitespace=nowarn", "-"], stdin=run.patch.encode())
        if done.returncode != 0:
            raise PatchConflict(f"refusing to apply: `git apply` refused the patch for {run.repo}: {_said(done)}")
        after = {**before, **_blobs(work)}
    lines: list[str] = []
    for change in changes:
        sides: list[Content] = []
        for blob in (change.old_blob, change.new_blob):
            if blob != ZERO and blob not in after:
                raise PatchConflict(f"refusing to apply: the patch's binary change of {change.path!r} names blob "
                                    f"{blob[:12]}, which applying it to the starting files did not give; "
                                    "nothing was written")
            sides.append(after.get(blob))
        lines += ["", *describe_change(change, sides[0], sides[1])]
    return lines


def _copy_start(run: RunRecord, work: Path, head: str | None) -> None:
    """Each touched file as the run found it, into `work`: read from the folder (no link followed) when it
    still holds it, else from commit `head`; its SHA-256 checked against base.json either way."""
    root = os.open(run.repo, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for rel, want in sorted(run.files.items()):
            if want is None:
                continue
            (kind, digest), content = _read_current(root, rel)
            data = content[0] if content is not None and digest == want else None
            if data is None and head is not None:
                place = _place(run.repo)
                data = _git(["cat-file", "blob", f"{head}:{place.prefix}{rel}"], place.cwd).stdout
            if data is None or hashlib.sha256(data).hexdigest() != want:
                raise PatchConflict(f"refusing to apply: {rel} is not as the run found it ({kind}); the binary "
                                    "changes cannot be shown, nothing was written",
                                    (FileChange(rel, _how(kind, want)),))
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_bytes(data)
    finally:
        os.close(root)


def _blobs(work: Path) -> dict[str, bytes | int]:
    """Every file under `work` by git blob id: its bytes, or its size when over SHOWN_BYTES."""
    found: dict[str, bytes | int] = {}
    for path in work.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found[blob_id(data)] = data if len(data) <= SHOWN_BYTES else len(data)
    return found


def _copy_touched(run: RunRecord, root: int, work: Path) -> None:
    """Each touched file of the folder that exists, copied into `work` as read (its hash checked)."""
    found: list[FileChange] = []
    for rel, want in sorted(run.files.items()):
        (kind, digest), content = _read_current(root, rel)
        if _differs(kind, digest, want):
            found.append(FileChange(rel, _how(kind, want)))
        elif content is not None:
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_bytes(content[0])
            os.chmod(work / rel, content[1])
    if found:
        listed = ", ".join(f"{c.path} ({c.how})" for c in found)
        raise PatchConflict(f"refusing to apply: {len(found)} file(s) in {run.repo} changed since the run "
                            f"started: {listed}. Nothing was written.", tuple(found))


def _how(kind: str, want: str | None) -> How:
    if kind in ("link", "other"):
        return "is a symbolic link" if kind == "link" else "is not a regular file"
    if kind == "absent":
        return "deleted"
    return "now exists" if want is None else "changed"


def _write_back(root: int, rel: str, work: Path, existed: bool) -> None:
    """`work/rel` written over `root/rel` (or `root/rel` removed when the patch deleted it)."""
    folder, _, name = rel.rpartition("/")
    result = work / rel
    if not result.is_file():
        if existed:
            parent = checks.dir_beneath(root, folder)
            try:
                os.unlink(name, dir_fd=parent)
            finally:
                os.close(parent)
            _prune(root, folder)
        return
    parent = checks.dir_beneath(root, folder, create=True)
    temp = f".{name}.harness-apply-{secrets.token_hex(6)}"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent)
        with os.fdopen(fd, "wb") as out:
            out.write(result.read_bytes())
            os.fchmod(out.fileno(), stat.S_IMODE(result.stat().st_mode))
        os.rename(temp, name, src_dir_fd=parent, dst_dir_fd=parent)      # replaces `name`, never follows it
    finally:
        os.close(parent)


def _prune(root: int, folder: str) -> None:
    """Remove `folder` and the folders above it while they are empty (as `git apply` does)."""
    while folder:
        above, _, name = folder.rpartition("/")
        parent = checks.dir_beneath(root, above)
        try:
            os.rmdir(name, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.EBUSY):
                return
            raise
        finally:
            os.close(parent)
        folder = above


def check_branch(run: RunRecord, name: str) -> str:
    """The commit a `--branch name` commit goes on top of (the recorded HEAD, else HEAD), once `run.repo`
    is a git checkout, `name` a valid branch name no branch has, and that commit holds every touched
    file as the run found it.

    Raises:
        TaskError: not a checkout, an invalid or taken name, or the commit is not in the checkout.
        PatchConflict: the commit does not hold the files the run started from (the run began from
            uncommitted work); `.changes` says which.
    """
    place = _place(run.repo)
    if run.mode != "git" or not place.in_git:
        raise TaskError(f"--branch needs a git checkout, and {run.repo} is a plain folder (the run recorded mode "
                        f"{run.mode!r}); apply to the files instead: harness apply {run.run_dir}")
    checked = _git(["check-ref-format", "--branch", name], place.cwd) if not name.startswith("-") else None
    if checked is None or checked.returncode != 0 or checked.stdout.decode().strip() != name:
        raise TaskError(f"--branch {name!r} is not a valid branch name (git check-ref-format --branch refused it, "
                        "or it starts with '-' or '@{'); expected e.g. --branch harness/fix-discount")
    if _git(["rev-parse", "--verify", "-q", f"refs/heads/{name}"], place.cwd).returncode == 0:
        raise TaskError(f"--branch {name!r}: a branch of that name exists in {run.repo}; choose a new name, "
                        f"e.g. --branch {name}-2")
    head = run.head or _rev(place.cwd, "HEAD")
    if head is None or _rev(place.cwd, f"{head}^{{commit}}") is None:
        raise TaskError(f"--branch: the commit the run started from ({head or 'no HEAD'}) is not in {run.repo}; "
                        f"apply to the files instead: harness apply {run.run_dir}")
    changes = tuple(FileChange(rel, how) for rel, how in _tree_changes(run, place, head))
    if changes:
        listed = ", ".join(f"{c.path} ({c.how})" for c in changes)
        raise PatchConflict(f"refusing --branch: the patch is against uncommitted work, not commit {head[:12]}: "
                            f"{listed} differ from that commit. Commit that work first and run again, or apply "
                            f"without --branch: harness apply {run.run_dir}", changes)
    return head


def commit_to_branch(run: RunRecord, name: str) -> Applied:
    """A commit of the patch on top of `check_branch`'s commit, made in a temporary index, on the new
    branch `name` (created only if it still does not exist). The working tree and the real index are
    not touched.

    Raises:
        TaskError, PatchConflict: see `check_branch`; PatchConflict too when the patch does not apply
            to the commit.
    """
    head = check_branch(run, name)
    place = _place(run.repo)
    with tempfile.TemporaryDirectory(prefix="harness-apply-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        steps = [(["read-tree", head], b""),
                 (["apply", "--cached", "--whitespace=nowarn", *place.directory(), "-"], run.patch.encode()),
                 (["write-tree"], b"")]
        for args, stdin in steps:
            proc = _git(args, place.cwd, stdin, env)
            if proc.returncode != 0:
                raise PatchConflict(f"refusing --branch: `git {args[0]}` failed on commit {head[:12]}: "
                                    f"{_said(proc)}. Commit your work first or apply without --branch: "
                                    f"harness apply {run.run_dir}")
        tree = proc.stdout.decode().strip()
        message = (f"Apply the patch of harness run {run.run_dir.name}\n\nMade by `harness apply --branch` from "
                   f"{run.run_dir / PATCH_FILE}.\n")
        made = _git(["commit-tree", tree, "-p", head, "-F", "-"], place.cwd, message.encode(), env)
    commit = made.stdout.decode().strip()
    if made.returncode != 0 or not commit:
        raise TaskError(f"git commit-tree failed in {run.repo}: {_said(made)}")
    ref = _git(["update-ref", "-m", "harness apply --branch", f"refs/heads/{name}", commit, ""], place.cwd)
    if ref.returncode != 0:
        raise TaskError(f"--branch {name!r} could not be created in {run.repo} (did it appear meanwhile?): "
                        f"{_said(ref)}; choose a new name, e.g. --branch {name}-2")
    return Applied(run.repo, tuple(sorted(run.files)), branch=name, commit=commit)


def _tree_changes(run: RunRecord, place: _Place, head: str) -> list[tuple[str, How]]:
    """Each touched file whose content in commit `head` is not what base.json recorded."""
    found: list[tuple[str, How]] = []
    for rel, want in sorted(run.files.items()):
        listed = _git(["ls-tree", "-z", "--full-tree", head, "--", place.prefix + rel], place.cwd)
        entry = listed.stdout.decode("utf-8", "surrogateescape").split("\0")[0]
        mode, _, oid = entry.split("\t")[0].partition(" blob ") if entry else ("", "", "")
        if not entry:
            if want is not None:
                found.append((rel, "deleted"))
        elif mode == "120000":
            found.append((rel, "is a symbolic link"))
        elif not oid or want is None:
            found.append((rel, "now exists" if want is None else "is not a regular file"))
        elif hashlib.sha256(_git(["cat-file", "blob", oid], place.cwd).stdout).hexdigest() != want:
            found.append((rel, "changed"))
    return found


def _place(repo: Path) -> _Place:
    found = hostgit.find_checkout(repo)
    if found is None:
        return _Place(repo, "", False)
    if found.top is None:
        raise TaskError(f"{repo} is inside a .git folder; pass the project's folder, e.g. --repo ~/code/shop")
    return _Place(found.top, found.prefix, True)


def _rev(cwd: Path, spec: str) -> str | None:
    proc = _git(["rev-parse", "--verify", "-q", spec], cwd)
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def _git(args: list[str], cwd: Path, stdin: bytes = b"", env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[bytes]:
    """`git ARGS` in `cwd` through the harness's view of the repository holding it (`core.hostgit`: git
    reads no config of the repository's, so it runs no program the repository names), with the
    harness's identity."""
    return hostgit.in_repository(cwd, args, stdin=stdin, env={**GIT_IDENTITY, **(env or {})})


def _said(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stderr.decode("utf-8", "replace").strip()[:1000] or f"exit status {proc.returncode}"

"""Applying to a tree: the compare-and-swap write of the patch into the folder's files. The touched
files are read into a private folder, `git apply` runs there (never in the operator's folder), the
hashes are checked again and each result is written back through `checks.dir_beneath`."""

from __future__ import annotations

import errno
import os
import secrets
import stat
import tempfile
from pathlib import Path

from harness import checks
from harness.core import hostgit
from harness.core.apply._git import said
from harness.core.apply.target import differs, how_changed, read_current, require_unchanged
from harness.core.apply.values import PATCH_FILE, Applied, FileChange, PatchConflict, RunRecord


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
                                    f"{said(done)}. Nothing was written; apply it by hand to see why "
                                    f"(git apply --reject {run.run_dir / PATCH_FILE})")
            require_unchanged(run)
            for rel in sorted(run.files):
                _write_back(root, rel, work, run.files[rel] is not None)
    finally:
        os.close(root)
    return Applied(run.repo, tuple(sorted(run.files)))


def _copy_touched(run: RunRecord, root: int, work: Path) -> None:
    """Each touched file of the folder that exists, copied into `work` as read (its hash checked)."""
    found: list[FileChange] = []
    for rel, want in sorted(run.files.items()):
        (kind, digest), content = read_current(root, rel)
        if differs(kind, digest, want):
            found.append(FileChange(rel, how_changed(kind, want)))
        elif content is not None:
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_bytes(content[0])
            os.chmod(work / rel, content[1])
    if found:
        listed = ", ".join(f"{c.path} ({c.how})" for c in found)
        raise PatchConflict(f"refusing to apply: {len(found)} file(s) in {run.repo} changed since the run "
                            f"started: {listed}. Nothing was written.", tuple(found))


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


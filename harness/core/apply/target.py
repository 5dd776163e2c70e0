"""Checking the target: what each touched file of the folder holds now, read without following a link
(`checks.open_beneath`), against what base.json recorded."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Literal

from harness import checks
from harness.core.apply.values import PATCH_FILE, FileChange, How, PatchConflict, RunRecord


def changes_since(run: RunRecord) -> tuple[FileChange, ...]:
    """Each touched file in `run.repo` that no longer holds what base.json recorded, and how."""
    found: list[FileChange] = []
    for rel, want in sorted(run.files.items()):
        kind, digest = _current(run.repo, rel)
        if differs(kind, digest, want):
            found.append(FileChange(rel, how_changed(kind, want)))
    return tuple(found)


def differs(kind: str, digest: str | None, want: str | None) -> bool:
    return kind in ("link", "other") or (want is None) != (kind == "absent") or digest != want


def how_changed(kind: str, want: str | None) -> How:
    if kind in ("link", "other"):
        return "is a symbolic link" if kind == "link" else "is not a regular file"
    if kind == "absent":
        return "deleted"
    return "now exists" if want is None else "changed"


def _current(root: Path | int, rel: str) -> tuple[Literal["file", "absent", "link", "other"], str | None]:
    """What is at `root/rel` now, never following a link on the way (`checks.open_beneath`): a file and
    its SHA-256, nothing, a symbolic link (there or on a folder above), or something else."""
    digest, _ = read_current(root, rel)
    return digest


def read_current(root: Path | int, rel: str) -> tuple[tuple[Literal["file", "absent", "link", "other"],
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


"""The binary changes of a run's patch, and what each writes, shown to the operator before it is applied."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from harness.core import hostgit
from harness.core.apply._git import find_place, git, said
from harness.core.apply.target import how_changed, read_current
from harness.core.apply.values import PATCH_FILE, FileChange, PatchConflict, RunRecord
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
from harness.errors import TaskError


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
            raise PatchConflict(f"refusing to apply: `git apply` refused the patch for {run.repo}: {said(done)}")
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
            (kind, digest), content = read_current(root, rel)
            data = content[0] if content is not None and digest == want else None
            if data is None and head is not None:
                place = find_place(run.repo)
                data = git(["cat-file", "blob", f"{head}:{place.prefix}{rel}"], place.cwd).stdout
            if data is None or hashlib.sha256(data).hexdigest() != want:
                raise PatchConflict(f"refusing to apply: {rel} is not as the run found it ({kind}); the binary "
                                    "changes cannot be shown, nothing was written",
                                    (FileChange(rel, how_changed(kind, want)),))
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


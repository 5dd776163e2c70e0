"""The approver's view of `apply_changes` for the files of a patch that git treats as binary.

Such changes are refused unless the operator allows them (`harness mcp --allow-binary`); allowed, each
is shown as `harness.core.binary_patch` describes, its bytes read from the sandbox's baseline repository
by the blob ids the patch itself names and checked on the host against them.

    binary_changes(patch)                the files the patch changes as binary, with their blob ids
    describe_binary(box, change)         the preview lines of one of them
    shown_patch(patch)                   the patch with its encoded binary data left out
    refusal(changes, root)               the error for a patch with binary changes, when not allowed
"""

from __future__ import annotations

from harness.agent.workspace import GIT_ENV
from harness.core.binary_patch import SHOWN_BYTES, ZERO, BinaryChange, BinaryPatchError, blob_id, describe, shown_patch
from harness.core.binary_patch import binary_changes as _changes
from harness.errors import ToolArgumentsError, ToolError
from sandbox.api import Sandbox
from sandbox.text import escape_ident

BLOB_FILE = "/tmp/harness/preview-blob"

__all__ = ["BinaryChange", "binary_changes", "describe_binary", "refusal", "shown_patch"]


def binary_changes(patch: str) -> list[BinaryChange]:
    """The files `patch` changes as binary (a ToolError when one names no full blob ids)."""
    try:
        return _changes(patch)
    except BinaryPatchError as exc:
        raise ToolError(f"{exc}, so it is not asked for") from None


def _blob(box: Sandbox, blob: str) -> bytes | int:
    """The bytes of `blob` from the sandbox's baseline repository, checked against the id (or its size in
    bytes when it is too large to show)."""
    size = box.exec(f"git cat-file -s {blob}", env=GIT_ENV, save_output=False)
    if not size.ok or not size.stdout.text.strip().isdigit():
        raise ToolError(f"the patch names blob {blob[:12]}, which the sandbox's baseline does not hold; call "
                        "apply_changes again")
    if int(size.stdout.text) > SHOWN_BYTES:
        return int(size.stdout.text)
    made = box.exec(f"git cat-file blob {blob} > {BLOB_FILE}", env=GIT_ENV, save_output=False)
    data = box.read_file(BLOB_FILE, max_bytes=SHOWN_BYTES + 1).data if made.ok else b""
    if blob_id(data) != blob:
        raise ToolError(f"blob {blob[:12]} read from the sandbox is not what its id says; nothing is asked for. "
                        "Call apply_changes again")
    return data


def describe_binary(box: Sandbox, change: BinaryChange) -> list[str]:
    """The preview lines of one binary change: what the file was and becomes, and its text, escaped."""
    old = _blob(box, change.old_blob) if change.old_blob != ZERO else None
    new = _blob(box, change.new_blob) if change.new_blob != ZERO else None
    return describe(change, old, new)


def refusal(changes: list[BinaryChange], root: str) -> ToolArgumentsError:
    names = ", ".join(escape_ident(c.path) for c in changes)
    return ToolArgumentsError(
        f"apply_changes: the patch changes {len(changes)} file(s) that git treats as binary ({names}): their diff "
        "is encoded data an approver cannot read, so nothing was asked for or written. Keep binary files out of "
        "the change (put back the original in /workspace, or remove the new file), or ask the operator to start "
        f"the server with `harness mcp --dir {escape_ident(root)} --allow-binary`, which shows each binary file's "
        "content to the approver as text, every unsafe byte escaped")

"""What the approver of `apply_changes` reads for the files of a patch that git treats as binary.

A file with one NUL byte is binary to git, so its diff is `GIT binary patch` and base85 lines nobody can
judge, yet it can be a script bash runs. Such changes are refused unless the operator allows them
(`harness mcp --allow-binary`); allowed, each binary file is shown as what it becomes: its sizes, SHA-256,
and its content as text with every unsafe byte escaped by the project's one escaper (`sandbox.text`:
NUL shows as `\\x00`, ESC as `\\x1b`, invalid UTF-8 as `\\xNN`), as a diff of the old and new text when
both are small. What is shown is read from the sandbox's baseline repository by the blob ids the patch
itself names (`git diff --binary` writes full ids), and each is checked on the host against its id,
so the preview shows exactly the bytes the patch writes.

    binary_changes(patch)                the files the patch changes as binary, with their blob ids
    describe_binary(box, change)         the preview lines of one of them
    shown_patch(patch)                   the patch with its encoded binary data left out
    refusal(changes, root)               the error for a patch with binary changes, when not allowed
"""

from __future__ import annotations

import codecs
import difflib
import hashlib
import re
from dataclasses import dataclass

from harness.errors import ToolArgumentsError, ToolError
from harness.workspace import GIT_ENV
from sandbox.api import Sandbox
from sandbox.text import escape_ident, escape_unsafe

ZERO = "0" * 40
SHOWN_BYTES = 64 * 1024
"""Blobs up to this size are shown (as escaped text, diffed when both sides are this small)."""
SHOWN_LINES = 400
BLOB_FILE = "/tmp/harness/preview-blob"
INDEX = re.compile(r"index ([0-9a-f]{40})\.\.([0-9a-f]{40})(?: ([0-7]{6}))?")


@dataclass(frozen=True)
class BinaryChange:
    path: str              # where it ends up (the old path for a deletion)
    old_blob: str          # ZERO: the file is new
    new_blob: str          # ZERO: the file is deleted
    mode: str              # e.g. 100755, "" when unchanged and not said


def _unquote(path: str) -> str:
    """A path as git writes it in a diff header: C-quoted when it holds unusual bytes."""
    if len(path) >= 2 and path.startswith('"') and path.endswith('"'):
        raw = codecs.escape_decode(path[1:-1].encode("utf-8", "surrogateescape"))[0]
        return raw.decode("utf-8", "surrogateescape")
    return path


def _header_path(line: str) -> str:
    """The b/ path of `diff --git a/P b/P` (P may hold spaces; both halves are equal without a rename)."""
    rest = line[len("diff --git "):]
    if rest.startswith('"'):
        return _unquote(rest[rest.index('" ') + 2:])[2:] if '" ' in rest else rest
    half = (len(rest) - 1) // 2
    return rest[half + 1:][2:] if rest[:half][2:] == rest[half + 1:][2:] else rest.split(" b/", 1)[-1]


def binary_changes(patch: str) -> list[BinaryChange]:
    found: list[BinaryChange] = []
    for section in re.split(r"^(?=diff --git )", patch, flags=re.MULTILINE):
        lines = section.split("\n")
        if not lines[0].startswith("diff --git ") or not any(
                ln == "GIT binary patch" or (ln.startswith("Binary files ") and ln.endswith(" differ"))
                for ln in lines):
            continue
        path, mode, index = _header_path(lines[0]), "", None
        for line in lines[1:]:
            if line.startswith(("rename to ", "copy to ")):
                path = _unquote(line.split(" to ", 1)[1])
            elif line.startswith(("new file mode ", "new mode ")):
                mode = line.rsplit(" ", 1)[1]
            elif (match := INDEX.fullmatch(line)) is not None:
                index = match
                mode = mode or (match.group(3) or "")
        if index is None:
            raise ToolError(f"the patch's binary change of {escape_ident(path)} names no full blob ids; it cannot be "
                            "shown to the approver, so it is not asked for")
        found.append(BinaryChange(path, index.group(1), index.group(2), mode))
    return found


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
    if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() != blob:   # noqa: S324 - git's own object id
        raise ToolError(f"blob {blob[:12]} read from the sandbox is not what its id says; nothing is asked for. "
                        "Call apply_changes again")
    return data


def _said(data: bytes | int) -> str:
    if isinstance(data, int):
        return f"{data} bytes (too large to show here, over {SHOWN_BYTES})"
    nul = data.count(b"\0")
    return f"{len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}" + (f", {nul} NUL byte(s)" if nul else "")


def _text_lines(data: bytes) -> list[str]:
    """`data` as lines of text, every unsafe byte escaped (a CR too: binary content keeps each byte seen)."""
    return escape_unsafe(data.decode("utf-8", "backslashreplace")).split("\n")


def describe_binary(box: Sandbox, change: BinaryChange) -> list[str]:
    """The preview lines of one binary change: what the file was and becomes, and its text, escaped."""
    old = _blob(box, change.old_blob) if change.old_blob != ZERO else None
    new = _blob(box, change.new_blob) if change.new_blob != ZERO else None
    what = "new file" if old is None else "deleted" if new is None else "changed"
    lines = [f"binary to git: {escape_ident(change.path)} ({what}" + (f", mode {change.mode}" if change.mode else "")
             + ")"]
    if old is not None:
        lines.append(f"  was:     {_said(old)}")
    if new is not None:
        lines.append(f"  becomes: {_said(new)}")
    if isinstance(new, bytes):
        before = _text_lines(old) if isinstance(old, bytes) else []
        shown = (list(difflib.unified_diff(before, _text_lines(new), "was", "becomes", lineterm=""))[2:]
                 if isinstance(old, bytes) else ["+" + line for line in _text_lines(new)])
        lines.append("  as text, every unsafe byte escaped (NUL shows as \\x00)" + (":" if len(shown) <= SHOWN_LINES
                     else f"; first {SHOWN_LINES} of {len(shown)} lines:"))
        lines += ["  " + line for line in shown[:SHOWN_LINES]]
    return lines


def shown_patch(patch: str) -> str:
    """The patch as the approver reads it: each `GIT binary patch` block (encoded data) replaced by a line
    saying where its content is shown."""
    kept: list[str] = []
    for section in re.split(r"^(?=diff --git )", patch, flags=re.MULTILINE):
        head, binary, _data = section.partition("GIT binary patch\n")
        kept.append(head + "(binary data: its content is shown as text after the patch)\n" if binary else section)
    return "".join(kept)


def refusal(changes: list[BinaryChange], root: str) -> ToolArgumentsError:
    names = ", ".join(escape_ident(c.path) for c in changes)
    return ToolArgumentsError(
        f"apply_changes: the patch changes {len(changes)} file(s) that git treats as binary ({names}): their diff "
        "is encoded data an approver cannot read, so nothing was asked for or written. Keep binary files out of "
        "the change (put back the original in /workspace, or remove the new file), or ask the operator to start "
        f"the server with `harness mcp --dir {escape_ident(root)} --allow-binary`, which shows each binary file's "
        "content to the approver as text, every unsafe byte escaped")

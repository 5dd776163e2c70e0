"""What a person reviewing a patch reads for the files git treats as binary.

A file with one NUL byte is binary to git, so its diff is `GIT binary patch` and base85 lines nobody can
judge, yet it can be a script bash runs. Whoever shows a patch to a person (the approver of the MCP
server's `apply_changes`, the operator of `harness apply`) refuses such changes unless told to allow
them, and, allowed, shows each binary file as what it becomes: its sizes, SHA-256, and its content as
text with every unsafe byte escaped by the project's one escaper (`sandbox.text`: NUL shows as `\\x00`,
ESC as `\\x1b`, invalid UTF-8 as `\\xNN`), as a diff of the old and new text when both are small. The
caller reads the bytes it shows by the blob ids the patch itself names (`git diff --binary` writes full
ids) and checks each against its id (`blob_id`), so what is shown is exactly what the patch writes.

    binary_changes(patch)          the files the patch changes as binary, with their blob ids
    describe(change, old, new)     the lines shown for one of them, given the bytes of both sides
    shown_patch(patch, where)      the patch with its encoded binary data left out
    blob_id(data)                  git's object id of a blob holding `data`
"""

from __future__ import annotations

import codecs
import difflib
import hashlib
import re
from dataclasses import dataclass

from sandbox.text import escape_ident, escape_unsafe

ZERO = "0" * 40
SHOWN_BYTES = 64 * 1024
"""Blobs up to this size are shown (as escaped text, diffed when both sides are this small)."""
SHOWN_LINES = 400
_INDEX = re.compile(r"index ([0-9a-f]{40})\.\.([0-9a-f]{40})(?: ([0-7]{6}))?")

Content = bytes | int | None
"""One side of a binary change: its bytes, its size when over SHOWN_BYTES, None when it does not exist."""


class BinaryPatchError(ValueError):
    """A binary change of the patch names no full blob ids, so its content cannot be shown."""


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
    """Each file `patch` changes as binary (`GIT binary patch` or `Binary files ... differ`).

    Raises:
        BinaryPatchError: such a change names no full blob ids (a diff made without --binary --full-index).
    """
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
            elif (match := _INDEX.fullmatch(line)) is not None:
                index = match
                mode = mode or (match.group(3) or "")
        if index is None:
            raise BinaryPatchError(f"the patch's binary change of {escape_ident(path)} names no full blob ids; "
                                   "its content cannot be shown")
        found.append(BinaryChange(path, index.group(1), index.group(2), mode))
    return found


def blob_id(data: bytes) -> str:
    """git's object id (SHA-1) of a blob holding `data`."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()   # noqa: S324 - git's own object id


def _said(data: bytes | int) -> str:
    if isinstance(data, int):
        return f"{data} bytes (too large to show here, over {SHOWN_BYTES})"
    nul = data.count(b"\0")
    return f"{len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}" + (f", {nul} NUL byte(s)" if nul else "")


def _text_lines(data: bytes) -> list[str]:
    """`data` as lines of text, every unsafe byte escaped (a CR too: binary content keeps each byte seen)."""
    return escape_unsafe(data.decode("utf-8", "backslashreplace")).split("\n")


def describe(change: BinaryChange, old: Content, new: Content) -> list[str]:
    """The lines shown for one binary change: what the file was and becomes, and its text, escaped."""
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


def shown_patch(patch: str, where: str = "after the patch") -> str:
    """The patch as a person reads it: each `GIT binary patch` block (encoded data) replaced by a line
    saying where its content is shown."""
    kept: list[str] = []
    for section in re.split(r"^(?=diff --git )", patch, flags=re.MULTILINE):
        head, binary, _data = section.partition("GIT binary patch\n")
        kept.append(head + f"(binary data: its content is shown as text {where})\n" if binary else section)
    return "".join(kept)

"""Unified diffs as pure functions: parse (with unidiff, after fixing miscounted hunk headers) and
apply hunks to text, locating each by its context with offset tolerance.

A hunk is placed only where its context and removed lines match exactly; the nearest such place
to the line the header names wins. A hunk that matches nowhere is refused with what it expected
and what the file has there. There is no fuzzy placement: a tolerant applier puts hunks in the
wrong place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from unidiff.errors import UnidiffParseError
from unidiff.patch import Hunk as DiffHunk
from unidiff.patch import PatchSet

from harness.errors import EditError
from harness.tools.editing.anchors import near_miss
from harness.tools.editing.render import numbered

HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
EXAMPLE = ("--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -17,3 +17,3 @@\n     counts = count(text)\n"
           "-    return ranked[: n - 1]\n+    return ranked[:n]\n")


@dataclass(frozen=True)
class Hunk:
    header: str
    source_start: int
    old: list[str]            # context and removed lines, without line endings
    new: list[str]            # context and added lines
    new_no_eol: bool          # the new last line has no newline at end of file


@dataclass(frozen=True)
class FilePatch:
    source: str | None        # None: the file is created
    target: str | None        # None: the file is deleted
    hunks: list[Hunk]


def recount(text: str) -> str:
    """`text` with every hunk header's line counts recomputed from the hunk body.

    Models often miscount; the body is the truth. A blank line inside a hunk is read as an empty
    context line (its leading space is often lost in transit).
    """
    lines = text.rstrip("\n").split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = HUNK_RE.match(lines[i])
        if not m and not lines[i].startswith("@@"):
            out.append(lines[i])
            i += 1
            continue
        body, i = _hunk_body(lines, i + 1)
        n_old = sum(1 for x in body if x[:1] in (" ", "-"))
        n_new = sum(1 for x in body if x[:1] in (" ", "+"))
        # A bare "@@" (no line numbers) gets start 0: placed by its context alone, if unique.
        old_start, new_start, rest = (m.group(1), m.group(3), m.group(5)) if m else ("0", "0", "")
        out.append(f"@@ -{old_start},{n_old} +{new_start},{n_new} @@{rest}")
        out.extend(body)
    return "\n".join(out) + "\n"


def _hunk_body(lines: list[str], j: int) -> tuple[list[str], int]:
    body: list[str] = []
    while j < len(lines):
        line = lines[j]
        header = line.startswith("@@") or line.startswith("diff ") or (
            line.startswith("--- ") and j + 1 < len(lines) and lines[j + 1].startswith("+++ "))
        if header or (line and line[0] not in " +-\\"):
            break
        body.append(line if line else " ")
        j += 1
    while body and body[-1] == " " and j < len(lines) and lines[j - 1] == "":
        body.pop()
        j -= 1
    return body, j


def parse(text: str) -> list[FilePatch]:
    try:
        patch = PatchSet(recount(text))
    except UnidiffParseError as exc:
        raise EditError(f"the patch could not be parsed ({exc}); expected a unified diff like:\n{EXAMPLE}") from None
    if not len(patch):
        raise EditError(f"the patch has no file headers (`--- a/path` then `+++ b/path`); "
                        f"expected a unified diff like:\n{EXAMPLE}")
    return [FilePatch(_name(f.source_file), _name(f.target_file), [_hunk(h) for h in f]) for f in patch]


def _name(raw: str) -> str | None:
    name = raw.split("\t")[0].strip()
    if name == "/dev/null":
        return None
    return name[2:] if name[:2] in ("a/", "b/") else name


def _hunk(h: DiffHunk) -> Hunk:
    old: list[str] = []
    new: list[str] = []
    new_no_eol = False
    last = ""
    for line in h:
        text = line.value.rstrip("\n").rstrip("\r") if line.line_type != "\\" else ""
        if line.line_type == " ":
            old.append(text)
            new.append(text)
        elif line.line_type == "-":
            old.append(text)
        elif line.line_type == "+":
            new.append(text)
        elif line.line_type == "\\" and last in (" ", "+"):
            new_no_eol = True
        last = line.line_type
    header = f"@@ -{h.source_start},{h.source_length} +{h.target_start},{h.target_length} @@"
    return Hunk(header, h.source_start, old, new, new_no_eol)


def apply(text: str, hunks: list[Hunk], shown: str) -> tuple[str, list[tuple[int, int]]]:
    """`text` with `hunks` applied in order; returns the new text and each hunk's new line span."""
    lines = text.split("\n")
    ends_nl = bool(lines) and lines[-1] == "" and text != ""
    if ends_nl or text == "":
        lines.pop()
    spans: list[tuple[int, int]] = []
    cursor, shift = 0, 0
    for n, hunk in enumerate(hunks, 1):
        expected = max(0, hunk.source_start - 1 + shift) if hunk.old else max(0, hunk.source_start + shift)
        if hunk.source_start == 0 and hunk.old:
            pos = _unique(lines, hunk, cursor, shown, n)
        else:
            pos = _locate(lines, hunk.old, expected, cursor)
        if pos is None:
            raise EditError(_mismatch(shown, n, hunk, lines, expected))
        at_end = pos + len(hunk.old) == len(lines)
        lines[pos:pos + len(hunk.old)] = hunk.new
        if at_end:
            ends_nl = not hunk.new_no_eol
        shift += (pos - expected if hunk.old else 0) + len(hunk.new) - len(hunk.old)
        cursor = pos + len(hunk.new)
        spans.append((pos + 1, max(pos + 1, pos + len(hunk.new))))
    result = "\n".join(lines) + ("\n" if ends_nl and lines else "")
    return result, spans


def _locate(lines: list[str], old: list[str], expected: int, cursor: int) -> int | None:
    if not old:
        return min(max(expected, cursor), len(lines))
    height = len(old)
    for distance in range(len(lines) + 1):
        for pos in (expected - distance, expected + distance) if distance else (expected,):
            if cursor <= pos <= len(lines) - height and lines[pos:pos + height] == old:
                return pos
    return None


def _unique(lines: list[str], hunk: Hunk, cursor: int, shown: str, n: int) -> int | None:
    """Where a hunk without line numbers goes: the one place its context matches, or an error."""
    height = len(hunk.old)
    found = [p for p in range(cursor, len(lines) - height + 1) if lines[p:p + height] == hunk.old]
    if len(found) > 1:
        listed = ", ".join(str(p + 1) for p in found[:10])
        raise EditError(f"hunk {n} of {shown} has no line numbers (a bare @@) and its context and removed "
                        f"lines occur {len(found)} times, at lines {listed}; add the line numbers "
                        "(@@ -L,N +L,M @@) or more context lines so it fits one place")
    return found[0] if found else None


def _mismatch(shown: str, n: int, hunk: Hunk, lines: list[str], expected: int) -> str:
    want = "\n".join(f"  {x}" for x in hunk.old[:20])
    lo, hi = expected + 1, min(len(lines), expected + max(len(hunk.old), 1))
    have = numbered(lines, lo, hi) if lo <= hi else f"(the file has only {len(lines)} lines)"
    hint = near_miss("\n".join(lines), "\n".join(hunk.old)) or "Nothing similar was found in the file."
    return (f"hunk {n} ({hunk.header}) of {shown} does not match the file anywhere: its context and "
            f"removed lines were expected near line {expected + 1}:\n{want}\n"
            f"but the file has there:\n{have}\n{hint}\n"
            "View the file and rebuild the hunk from what it holds now.")

"""Anchor replacement on text, as pure functions: exactly one occurrence, or a refusal that helps.

Zero occurrences point to the closest near-miss (whitespace-only differences first, then the most
similar block of the same height) with a short diff; several occurrences list their line numbers.
A near-miss is only ever pointed to, never applied.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from harness.errors import EditError
from harness.tools.editing.render import line_of

MAX_LISTED = 10


@dataclass(frozen=True)
class Replacement:
    text: str          # the whole new file text
    first_line: int    # first line of the replaced region, in the new text
    last_line: int     # last line of the replaced region, in the new text


def occurrences(text: str, old: str) -> list[int]:
    """Character offsets where `old` starts in `text`, overlapping occurrences included."""
    found, pos = [], text.find(old)
    while pos != -1:
        found.append(pos)
        pos = text.find(old, pos + 1)
    return found


def replace_once(text: str, old: str, new: str, shown_path: str) -> Replacement:
    """`text` with the single occurrence of `old` replaced by `new`, or EditError."""
    if "\r\n" in text and "\r\n" not in old and "\n" in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
    where = occurrences(text, old)
    if not where:
        raise EditError(_not_found_message(text, old, shown_path))
    if len(where) > 1:
        lines = sorted({line_of(text, p) for p in where})
        listed = ", ".join(map(str, lines[:MAX_LISTED])) + (", ..." if len(lines) > MAX_LISTED else "")
        raise EditError(f"`old` occurs {len(where)} times in {shown_path} (starting at lines {listed}); "
                        "nothing was changed. Make `old` unique by including a neighbouring line, e.g. "
                        "the `def` line above it, and call edit again")
    start = where[0]
    result = text[:start] + new + text[start + len(old):]
    first = line_of(result, start)
    last = first + max(new.count("\n") - (1 if new.endswith("\n") else 0), 0)
    return Replacement(result, first, last)


def _not_found_message(text: str, old: str, shown_path: str) -> str:
    head = f"`old` does not occur in {shown_path}; nothing was changed."
    lines = [x for x in old.split("\n") if x.strip()]
    if lines and all(re.match(r"\s*\d+  ", x) for x in lines):
        return (f"{head} Its lines start with line numbers, as `view` shows them (e.g. {lines[0][:40]!r}); "
                "the numbers are not part of the file: leave them out of `old` and `new`.")
    hint = near_miss(text, old)
    if hint is None:
        return (f"{head} Nothing similar was found either. View the file and copy the lines to "
                "replace exactly, indentation included.")
    return f"{head} {hint}\nCopy `old` exactly from the file (view it if unsure) and call edit again."


def _norm(line: str) -> str:
    return re.sub(r"\s+", " ", line).strip()


def near_miss(text: str, old: str) -> str | None:
    """Where `old` nearly occurs, with a short diff, or None when nothing is close."""
    lines = text.splitlines()
    want = old.splitlines() or [old]
    height = len(want)
    if height > len(lines):
        return None
    normed, want_norm = [_norm(x) for x in lines], [_norm(x) for x in want]
    for i in range(len(lines) - height + 1):
        if normed[i:i + height] == want_norm:
            return (f"Lines {i + 1}-{i + height} match it except for whitespace (indentation, tabs or "
                    f"trailing spaces):\n{_diff(want, lines[i:i + height], i + 1)}")
    best = _most_similar(lines, want)
    if best is None:
        return None
    i, ratio = best
    return (f"The most similar block is lines {i + 1}-{i + height} ({ratio:.0%} similar):\n"
            f"{_diff(want, lines[i:i + height], i + 1)}")


def _most_similar(lines: list[str], want: list[str]) -> tuple[int, float] | None:
    key_index = max(range(len(want)), key=lambda j: len(want[j].strip()))
    key = want[key_index].strip()
    if not key:
        return None
    scores: list[tuple[float, int]] = []
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(key)
    for n, line in enumerate(lines):
        matcher.set_seq1(line.strip())
        if matcher.real_quick_ratio() >= 0.5 and matcher.quick_ratio() >= 0.5:
            scores.append((matcher.ratio(), n))
    best: tuple[int, float] | None = None
    joined = "\n".join(want)
    for _, n in sorted(scores, reverse=True)[:5]:
        start = max(0, min(n - key_index, len(lines) - len(want)))
        block = lines[start:start + len(want)]
        by_line = difflib.SequenceMatcher(None, want, block).ratio()
        by_char = difflib.SequenceMatcher(None, joined, "\n".join(block)).ratio()
        ratio = 0.7 * by_char + 0.3 * by_line
        if ratio >= 0.5 and (best is None or ratio > best[1]):
            best = (start, ratio)
    return best


def _diff(want: list[str], have: list[str], first_line: int, max_lines: int = 14) -> str:
    out = list(difflib.unified_diff(want, have, "your old", f"the file at line {first_line}",
                                    lineterm="", n=1))
    shown = [repr_ws(x) for x in out[:max_lines]]
    if len(out) > max_lines:
        shown.append(f"... ({len(out) - max_lines} more diff lines)")
    return "\n".join(shown)


def repr_ws(line: str) -> str:
    """Make tabs and trailing spaces visible in a diff line."""
    shown = line.replace("\t", "→")
    stripped = shown.rstrip(" ")
    return stripped + "·" * (len(shown) - len(stripped))

"""How file text is shown to the model: numbered lines, long lines cut, regions around a change."""

from __future__ import annotations

from harness.errors import EditError

MAX_LINE_CHARS = 400


def decode_for_edit(data: bytes, shown_path: str) -> str:
    """The file as text, or EditError when it is not UTF-8 (binary files are not edited here)."""
    if b"\x00" in data[:8192]:
        raise EditError(f"{shown_path} looks binary (it holds NUL bytes, {len(data):,} bytes); the "
                        "edit tools change text files only; use bash for binary files")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EditError(f"{shown_path} is not valid UTF-8 (byte {exc.start}: {exc.reason}); the edit "
                        "tools change UTF-8 text files only; use bash (e.g. iconv, sed) for this one") from None


def cut_line(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return f"{line[:MAX_LINE_CHARS]}… [line cut: {len(line):,} chars]"


def numbered(lines: list[str], first: int, last: int) -> str:
    """Lines `first`..`last` (1-based, inclusive) of `lines`, each prefixed by its number."""
    width = len(str(max(last, 1)))
    return "\n".join(f"{n:>{width}}  {cut_line(lines[n - 1])}" for n in range(first, last + 1))


def region(text: str, first: int, last: int, context: int = 3) -> str:
    """The lines `first`..`last` of `text` with `context` lines around, numbered."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return "(the file is now empty)"
    lo = max(1, min(first, len(lines)) - context)
    hi = min(len(lines), max(last, first) + context)
    return numbered(lines, lo, hi)


def line_of(text: str, offset: int) -> int:
    """1-based line number of character `offset` in `text`."""
    return text.count("\n", 0, offset) + 1

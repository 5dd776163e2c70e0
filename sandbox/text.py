"""Making text safe to show to a model or print on a terminal: the one escaper of the project.

Characters that act on a terminal or hide or reorder text become visible escapes: C0/C1 controls
(NUL, ESC, CR, DEL, ...; newline and tab stay), format characters (bidi overrides, zero-width
characters, BOM), line/paragraph separators, surrogates, private-use and unassigned code points
(`\\x1b`, `\\u202e`, `\\U000f0000`). Invalid UTF-8 in bytes becomes `\\xNN`. About 3 ms per
64 KiB of non-ASCII output, far less for ASCII. `safe_json` applies the same rule to JSON written
into files a person may print (the characters become JSON `\\u` escapes: the same data once parsed).
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

_UNSAFE_CATEGORIES = frozenset(("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"))


def _unsafe(ch: str) -> bool:
    return ch not in "\n\t" and unicodedata.category(ch) in _UNSAFE_CATEGORIES


def escape_char(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


class _Table(dict):  # type: ignore[type-arg]
    """str.translate table deciding each code point once: hits run at C speed. Only the Basic
    Multilingual Plane is remembered, so the table stays bounded whatever the input."""

    escape = staticmethod(escape_char)

    def __missing__(self, code: int) -> int | str:
        ch = chr(code)
        value: int | str = code
        if _unsafe(ch):
            value = self.escape(ch)
        if code < 0x10000:
            self[code] = value
        return value


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


class _JsonTable(_Table):
    escape = staticmethod(_json_escape)


_TABLE = _Table()
_JSON_TABLE = _JsonTable()


def escape_unsafe(text: str) -> str:
    """`text` with every control, format and invisible character shown as an escape."""
    return text.translate(_TABLE)


def escape_ident(text: str) -> str:
    """A one-line value (a tool name, a key, an id) in plain printable ASCII: everything else, newline
    and tab included, escaped, so it can neither act on a terminal nor fake a line of its own."""
    return "".join(ch if " " <= ch <= "~" else escape_char(ch) for ch in text)


def escape_output(data: bytes | str) -> str:
    """Command output as text that cannot move a cursor, hide characters or reorder what is shown
    (CRLF line ends become plain newlines first)."""
    text = data.decode("utf-8", errors="backslashreplace") if isinstance(data, bytes) else data
    return escape_unsafe(text.replace("\r\n", "\n"))


def safe_json(value: Any, indent: int | None = None) -> str:
    """`value` as JSON for a file a person may print: readable UTF-8, but every character
    `escape_unsafe` would escape is written as a JSON `\\u` escape (the same data once parsed)."""
    return json.dumps(value, indent=indent, ensure_ascii=False).translate(_JSON_TABLE)

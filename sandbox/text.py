"""Making bytes from a sandbox safe to show to a model or print on a terminal.

Invalid UTF-8 becomes `\\xNN`; NUL, escape sequences and other control characters become visible
escapes (`\\x00`, `\\x1b`); bidirectional overrides and zero-width characters, which can make text
read differently from what it is, become `\\u202e`-style escapes. Newlines and tabs stay.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f"           # C0 (but \t and \n) and C1 controls, DEL
    "\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]"  # zero-width, bidi embeddings/overrides/isolates
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(data: bytes | str) -> str:
    """`data` as text that cannot move a cursor, hide characters or reorder what is shown."""
    text = data.decode("utf-8", errors="backslashreplace") if isinstance(data, bytes) else data
    text = text.replace("\r\n", "\n")
    return _UNSAFE.sub(_escape, text)

"""What a human judges before approving: previews built from model-given text, made safe to show.

Everything the model wrote reaches the human through `sandbox.text.escape_unsafe` (free text: bodies, messages) or
`sandbox.text.escape_ident` (identifiers: hosts, URLs, package names, branches, header names). Both make invisible
or terminal-active characters visible as escapes, so a payload cannot recolour the terminal, move
the cursor, reorder text with bidi overrides, hide characters with zero-width joiners, or forge a
line that looks like our prompt. `escape_ident` also escapes every non-ASCII character, so a host such
as ``exаmple.com`` (Cyrillic ``а``) shows as ``ex\\u0430mple.com``.

Nothing the model sends is masked: the human approves what they can read. The only values a preview
hides are ones the operator supplied (a credential the host adds when the request runs, see
`harness.tools.outbound.credentials`), and the preview names where each came from (`operator_value`).

Renderers (console, web page, CLI) show previews inside a gutter (see `gutter`) and sanitise again
when they display, because the database is not trusted to hold only clean text. Every other string
they print that came from the model or the database (tool, key, session, decider, reason) goes
through `escape_unsafe` or `escape_ident` too; nothing is printed through a markup interpreter.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from sandbox.text import escape_unsafe

BODY_HEAD_CHARS = 2000


def has_non_ascii(text: str) -> bool:
    return any(ord(ch) > 0x7E or ord(ch) < 0x20 for ch in text)


def masked_url(url: str) -> str:
    """An operator-configured URL (a git remote, a package index) with its user and password hidden."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        netloc = f"***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return url


def operator_value(source: str) -> str:
    """How a preview shows a value the operator supplied (never one the model sent): hidden, with where
    it comes from."""
    return (f"(hidden: {escape_unsafe(source)}; added by the host when the request runs, not stored, "
            "not shown to the model)")


def body_preview(body: str | bytes | None, limit: int = BODY_HEAD_CHARS) -> list[str]:
    """The body as preview lines: its size, and its head (safe text) when it is text."""
    if body is None or body in ("", b""):
        return ["body: (empty)"]
    raw = body.encode("utf-8", "surrogateescape") if isinstance(body, str) else body
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return [f"body: {len(raw)} bytes of binary data (not shown); sha256 recorded with the request"]
    shown = text[:limit]
    lines = [f"body: {len(raw)} bytes" + ("" if len(text) <= limit
                                          else f"; first {limit} of {len(text)} characters shown")]
    lines += ["  " + line for line in escape_unsafe(shown).split("\n")]
    return lines


def field_lines(fields: list[tuple[str, str]]) -> list[str]:
    width = max((len(label) for label, _ in fields), default=0)
    return [f"{label.ljust(width)}  {value}" for label, value in fields]


def gutter(preview: str, request_id: int) -> str:
    """The preview framed for a terminal: every line of it behind "│ ", so none can pass for ours."""
    body = "\n".join("│ " + line for line in escape_unsafe(preview).split("\n"))
    return (f"┌─ outbound request #{request_id}: what will run if you approve ─\n{body}\n"
            f"└─ end of request #{request_id} ({preview.count(chr(10)) + 1} lines) ─")

"""A third-party agent's model calls as the console shows them: one row per request the agent sent to the
model gateway (its run folder's calls.jsonl, written by `harness.gateway.record`), model calls and refused
requests alike, with the tokens, cost and time of each, and their totals.

Read by the one bounded reader (harness.web.records): at most `CALLS_CAP` bytes of the file and
`MAX_CALLS` rows; a line over `LINE_CAP` bytes is not parsed (its row says its size); what was not read
is said in `cut`. Every string leaves through `safe_tree`; the outcome reaches a CSS class only through
the fixed table `OUTCOMES`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, BinaryIO

from harness.web.records import LINE_CAP, Damaged, NotFound, open_regular, parse_json
from harness.web.runs import css_class, safe_dict
from sandbox.text import escape_unsafe

CALLS_FILE = "calls.jsonl"    # harness.gateway.record.RECORD_NAME (the web layer does not import the gateway)
CALLS_CAP = 64_000_000        # bytes of calls.jsonl read (each line holds the whole request: it grows fast)
MAX_CALLS = 10_000            # rows shown
REPLY_CHARS = 300             # characters of a reply's text shown in its row
OUTCOMES = ("answered", "truncated", "refused", "bad_request", "budget", "model_error")
TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def calls_view(folder: Path) -> dict[str, Any] | None:
    """The rows and totals of `folder`'s calls.jsonl; None when it has none; `refused` when it is a link
    or not a regular file."""
    try:
        opened = open_regular(folder / CALLS_FILE)
    except NotFound as exc:
        return {"calls": [], "totals": {}, "cut": [], "refused": escape_unsafe(str(exc))}
    if opened is None:
        return None
    with opened as f:
        rows, cut = _rows(f)
    return {"calls": rows, "totals": _totals(rows), "cut": [escape_unsafe(c) for c in cut]}


def _rows(f: BinaryIO) -> tuple[list[dict[str, Any]], list[str]]:
    size = os.fstat(f.fileno()).st_size
    rows: list[dict[str, Any]] = []
    read = 0
    while len(rows) < MAX_CALLS and read < CALLS_CAP:
        line = f.readline(LINE_CAP + 1)
        if not line:
            return rows, []
        read += len(line)
        number = len(rows) + 1
        if len(line) > LINE_CAP:
            read += _skip_rest(f, line)
            rows.append({"n": number, "damaged": f"line {number} is over the {LINE_CAP:,}-byte cap for one line: "
                                                  "not read"})
        elif line.strip():
            rows.append(_row(number, line))
    if f.read(1):
        return rows, [f"calls.jsonl is {size:,} bytes; the console reads its first {read:,} bytes and at most "
                      f"{MAX_CALLS:,} calls (caps: {CALLS_CAP:,} bytes): the rest is not shown"]
    return rows, []


def _skip_rest(f: BinaryIO, line: bytes) -> int:
    """Read past the rest of an over-long line (in bounded pieces); the bytes skipped."""
    skipped = 0
    while not line.endswith(b"\n") and skipped < CALLS_CAP:
        line = f.readline(1 << 20)
        if not line:
            break
        skipped += len(line)
    return skipped


def _row(number: int, line: bytes) -> dict[str, Any]:
    try:
        data = parse_json(line, f"line {number}")
    except Damaged as exc:
        return {"n": number, "damaged": escape_unsafe(str(exc))}
    if not isinstance(data, dict):
        return {"n": number, "damaged": f"line {number}: a JSON {type(data).__name__}, expected an object"}
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    row = {"n": number, "time": data.get("time"), "method": data.get("method"), "route": data.get("route"),
           "status": _number(data.get("status")), "outcome": data.get("outcome"), "stream": data.get("stream"),
           "tokens": {k: _number(usage.get(k)) for k in TOKENS} if usage else None,
           "cost_usd": _number(data.get("cost_usd")), "seconds": _number(data.get("seconds")),
           "error": data.get("error"), "reply": _reply(data.get("response")),
           "outcome_class": css_class(data.get("outcome"), OUTCOMES)}
    return safe_dict(row)


def _number(value: Any) -> int | float | None:
    """A figure the page computes with: a number, else None (a file's "12" or {} is no figure)."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _reply(response: Any) -> str | None:
    """What the model answered, in one line: its text (cut) and the tools it called."""
    if not isinstance(response, dict) or not isinstance(response.get("content"), list):
        return None
    blocks = [b for b in response["content"] if isinstance(b, dict)]
    text = " ".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text").strip()
    calls = [f"→ {b.get('name')}" for b in blocks if b.get("type") == "tool_use"]
    shown = text if len(text) <= REPLY_CHARS else text[:REPLY_CHARS] + f"… ({len(text):,} characters)"
    return " ".join(filter(None, [shown, *calls])) or None


def _totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Requests, model calls answered (those with usage), refused requests, tokens summed, and the cost: None
    (unknown) when an answered call has none, never 0."""
    answered = [r["tokens"] for r in rows if isinstance(r.get("tokens"), dict)]
    costs = [r.get("cost_usd") for r in rows if isinstance(r.get("tokens"), dict)]
    known = [c for c in costs if isinstance(c, int | float)]
    return {"requests": len(rows), "answered": len(answered),
            "refused": sum(1 for r in rows if r.get("outcome") == "refused"),
            "tokens": {k: sum(t[k] for t in answered if isinstance(t[k], int)) for k in TOKENS},
            "cost_usd": round(sum(known), 6) if known and len(known) == len(costs) else None}

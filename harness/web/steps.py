"""A run's trajectory as the console pages it: lines indexed by offset as the file grows, a page of
steps read by seeking, each line parsed by the one bounded reader (harness.web.records).

Every read is bounded, and what was cut is said in the answer (`cut`) and on the page:

- the index covers the first `TRAJECTORY_CAP` bytes and `MAX_LINES` lines of the file (8 bytes of
  memory per line); what lies past them is not shown, and the answer says how much there is;
- a line over `LINE_CAP` bytes is not read: its step says its size and shows its first bytes; a line
  with no end yet that is already over the cap is said as well;
- a page reads at most `PAGE_BYTES` bytes of lines (at least one line): a page of long lines comes
  back shorter, and the page asks for the next ones from where it ended;
- a line nested deeper than `DEPTH_CAP` is not parsed (its step says so).
"""

from __future__ import annotations

import json
import os
import threading
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from harness.core.records import RecordError, SessionResult
from harness.web.records import LINE_CAP, TEXT_CAP, Damaged, NotFound, open_regular, parse_json, read_record
from harness.web.runs import LIVE_SECONDS, STEP_PAGE, Roots, css_class, fold, mtime, safe_tree
from sandbox.text import escape_unsafe

TRAJECTORY_CAP = 256 * 2**20  # bytes of a trajectory indexed (a 10,000-step run is 15 MB)
MAX_LINES = 1_000_000         # lines of a trajectory indexed
PAGE_BYTES = 16_000_000       # bytes of lines read for one page of steps
SHOWN_OF_CUT = 2000           # bytes shown of a line over LINE_CAP
ROLES = ("system", "user", "assistant", "invalid")


@dataclass
class _Index:
    inode: int
    size: int = 0                     # the file's size when last looked at
    scanned: int = 0                  # bytes of the file looked at for newlines
    offsets: array[int] = field(default_factory=lambda: array("q", [0]))   # each whole line's start, then the next's

    def cuts(self) -> list[str]:
        """What of the file this index leaves out, in words (empty: nothing)."""
        said, lines = [], len(self.offsets) - 1
        if self.size > self.scanned and (self.scanned >= TRAJECTORY_CAP or lines >= MAX_LINES):
            said.append(f"trajectory.jsonl is {self.size:,} bytes; the console reads its first {self.scanned:,} "
                        f"({lines:,} lines; caps: {TRAJECTORY_CAP:,} bytes, {MAX_LINES:,} lines): the rest is "
                        "not shown")
        if self.scanned - self.offsets[-1] > LINE_CAP:
            said.append(f"line {lines + 1} (from byte {self.offsets[-1]:,}) is over the {LINE_CAP:,}-byte cap for "
                        f"one line and has no end within the {self.scanned:,} bytes read: not read")
        return said


@dataclass(frozen=True)
class Line:
    number: int
    data: bytes                       # the whole line; when `cut`, only its first SHOWN_OF_CUT bytes
    length: int                       # its length in the file, newline excluded
    cut: bool


class Trajectories:
    """Line offsets of the trajectories the console has opened, extended as a live run appends:
    a page of steps is read by seeking, never by reading the whole file again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._indexes: dict[Path, _Index] = {}

    def index(self, path: Path) -> _Index:
        opened = open_regular(path)
        if opened is None:
            return _Index(0)
        with opened as f:
            info = os.fstat(f.fileno())
            with self._lock:
                index = self._indexes.get(path)
                if index is None or index.inode != info.st_ino or info.st_size < index.scanned:
                    index = self._indexes[path] = _Index(info.st_ino)
                index.size = info.st_size
                _extend(f, index)
                return index

    def count(self, path: Path) -> int:
        return len(self.index(path).offsets) - 1

    def lines(self, path: Path, start: int, limit: int, budget: int = PAGE_BYTES) -> list[Line]:
        """Lines `start`.. (at most `limit`, and no more than `budget` bytes read, one line at least)."""
        offsets = self.index(path).offsets
        end, spent = start, 0
        while end < min(len(offsets) - 1, start + limit):
            length = offsets[end + 1] - offsets[end] - 1
            cost = SHOWN_OF_CUT if length > LINE_CAP else length
            if end > start and spent + cost > budget:
                break
            end, spent = end + 1, spent + cost
        opened = open_regular(path) if start < end else None
        if opened is None:
            return []
        with opened as f:
            if spent == offsets[end] - offsets[start] - (end - start):     # no line over the cap: one read
                f.seek(offsets[start])
                data = f.read(offsets[end] - offsets[start])
                return [Line(start + i, raw, len(raw), False) for i, raw in enumerate(data.split(b"\n")[: end - start])]
            got = []
            for n in range(start, end):
                length = offsets[n + 1] - offsets[n] - 1
                f.seek(offsets[n])
                got.append(Line(n, f.read(SHOWN_OF_CUT if length > LINE_CAP else length), length, length > LINE_CAP))
            return got


def _extend(f: BinaryIO, index: _Index) -> None:
    """Find the newlines of `f` past `index.scanned`, up to TRAJECTORY_CAP bytes and MAX_LINES lines."""
    end = min(index.size, TRAJECTORY_CAP)
    f.seek(index.scanned)
    while index.scanned < end and len(index.offsets) <= MAX_LINES:
        chunk = f.read(min(1 << 20, end - index.scanned))
        if not chunk:
            return
        start = 0
        while len(index.offsets) <= MAX_LINES and (hit := chunk.find(b"\n", start)) >= 0:
            index.offsets.append(index.scanned + hit + 1)
            start = hit + 1
        index.scanned += len(chunk) if len(index.offsets) <= MAX_LINES else start


def _cut_step(line: Line) -> dict[str, Any]:
    why = (f"line {line.number + 1} is {line.length:,} bytes, over the {LINE_CAP:,}-byte cap for one line: not read; "
           f"its first {len(line.data):,} bytes: ")
    return {"index": line.number, "role": "invalid", "role_class": "invalid", "cut": why.split(";")[0],
            "blocks": [{"type": "text", **fold(escape_unsafe(why + line.data.decode("utf-8", "backslashreplace")))}]}


def _step(line: Line) -> dict[str, Any]:
    """One trajectory line as the page shows it: blocks with long texts folded, tool timings joined."""
    if line.cut:
        return _cut_step(line)
    number = line.number
    try:
        data = parse_json(line.data, f"line {number + 1}")
    except Damaged as exc:
        return {"index": number, "role": "invalid", "role_class": "invalid", "blocks": [
            {"type": "text", **fold(escape_unsafe(f"{exc}: " + line.data[:SHOWN_OF_CUT].decode("utf-8",
                                                                                            "backslashreplace")))}]}
    if not isinstance(data, dict):
        data = {"role": "invalid", "content": [{"type": "text", "text": repr(data)[:SHOWN_OF_CUT]}]}
    meta: dict[str, Any] = data["meta"] if isinstance(data.get("meta"), dict) else {}
    content = data.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    blocks = [_block(i, block, _timings(meta)) for i, block in enumerate(content if isinstance(content, list) else [])
              if isinstance(block, dict) and block.get("type") in ("text", "tool_use", "tool_result")]
    role = escape_unsafe(str(data.get("role", "?")))
    step_meta = {k: meta[k] for k in ("turn", "stop_reason", "usage") if k in meta}
    return {"index": number, "role": role, "role_class": css_class(data.get("role"), ROLES),
            "meta": safe_tree(step_meta), "blocks": blocks}


def _timings(meta: dict[str, Any]) -> dict[str, dict[str, Any]]:
    tools = meta.get("tools")
    return {str(t.get("id")): t for t in (tools if isinstance(tools, list) else []) if isinstance(t, dict)}


def _block(i: int, block: dict[str, Any], timings: dict[str, dict[str, Any]]) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "tool_use":
        return {"type": "tool_use", "block": i, "id": escape_unsafe(str(block.get("id", ""))),
                "name": escape_unsafe(str(block.get("name", ""))),
                "input": fold(escape_unsafe(json.dumps(block.get("input"), indent=2, ensure_ascii=False)))}
    if kind == "tool_result":
        call = str(block.get("tool_use_id", ""))
        timing = timings.get(call, {})
        return {"type": "tool_result", "block": i, "tool_use_id": escape_unsafe(call),
                "is_error": bool(block.get("is_error")), "error_kind": safe_tree(block.get("error_kind")),
                "name": safe_tree(timing.get("name")), "seconds": safe_tree(timing.get("seconds")),
                "details": safe_tree(timing.get("details")), **fold(escape_unsafe(str(block.get("content", ""))))}
    return {"type": "text", "block": i, **fold(escape_unsafe(str(block.get("text", ""))))}


def steps_view(roots: Roots, trajectories: Trajectories, ref: str, start: int,
               limit: int = STEP_PAGE) -> dict[str, Any]:
    """Steps `start`.. of a run's trajectory, the whole count, whether the run is still going, and what
    of the file is not shown (`cut`)."""
    folder = roots.resolve(ref)
    path = folder / "trajectory.jsonl"
    index = trajectories.index(path)
    steps = [_step(line) for line in trajectories.lines(path, max(0, start), max(1, min(limit, 1000)))]
    live = time.time() - (mtime(path) or 0.0) < LIVE_SECONDS and not _finished(folder)
    return {"total": len(index.offsets) - 1, "start": start, "steps": steps, "live": live,
            "cut": [escape_unsafe(c) for c in index.cuts()]}


def _finished(folder: Path) -> bool:
    """Whether the run's result.json is there and whole (one being written keeps the page following)."""
    try:
        SessionResult.from_dict(read_record(folder / "result.json"), "result.json", strict=False)
    except (Damaged, RecordError):      # torn, or missing (None) or not an object: not finished
        return False
    return True


def block_view(roots: Roots, trajectories: Trajectories, ref: str, line: int, block: int) -> dict[str, Any]:
    """The whole text of one block (a folded output), escaped, capped at TEXT_CAP characters."""
    path = roots.resolve(ref) / "trajectory.jsonl"
    got = trajectories.lines(path, line, 1)
    if not got:
        raise NotFound(f"the trajectory of {ref!r} has no line {line}")
    if got[0].cut:
        raise NotFound(_cut_step(got[0])["cut"])
    try:
        data = parse_json(got[0].data, f"line {line + 1}")
    except Damaged as exc:
        raise NotFound(f"line {line} of {ref!r} cannot be read: {exc}") from exc
    content = data.get("content") if isinstance(data, dict) else None
    chosen = content[block] if isinstance(content, list) and block < len(content) else None
    if not isinstance(chosen, dict):
        raise NotFound(f"line {line} of {ref!r} has no block {block}")
    if chosen.get("type") == "tool_use":
        text = json.dumps(chosen.get("input"), indent=2, ensure_ascii=False)
    else:
        text = str(chosen.get("text", chosen.get("content", "")))
    return {"text": escape_unsafe(text[:TEXT_CAP]), "chars": len(text), "cut": len(text) > TEXT_CAP}

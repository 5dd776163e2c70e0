"""The console's one bounded reader: every file a run or evaluation folder holds is opened here, by
`open_regular` (the one open call: no link followed, nothing but a regular file, never blocking on a
fifo), and every JSON record and trajectory line is parsed here, by `parse_json`.

Every read has a bound, and says what it cut:

- file size: a text view reads its first `TEXT_CAP` bytes (`read_capped`); a JSON record over
  `RECORD_CAP` bytes is not read at all (`read_record` raises `Damaged` saying its size and the cap);
- line length: one trajectory line over `LINE_CAP` bytes is not read (runs.py says so in its step);
- JSON depth: nesting deeper than `DEPTH_CAP` is refused before `json.loads` runs (`nesting`, a scan
  in C of the brackets outside strings), since Python's parser, and every walk of its result, would
  otherwise fail deep down with a RecursionError.

A value that JSON allows but the console's answers cannot carry is kept as its text: `NaN`,
`Infinity`, a float that overflows, an integer of more digits than Python converts.

`Damaged` is what one unreadable record raises: the file's name and why, said to the page for that
folder only; the other folders are listed as ever.
"""

from __future__ import annotations

import json
import math
import operator
import os
import re
import stat
from itertools import accumulate, count
from pathlib import Path
from typing import Any, BinaryIO

from harness import checks
from harness.errors import HarnessError, UnsafePathError

TEXT_CAP = 4_000_000          # bytes of a patch, test output or log read for a view
RECORD_CAP = 16_000_000       # bytes of a JSON record (result.json, report.json, run.json, done)
LINE_CAP = 4_000_000          # bytes of one trajectory line
DEPTH_CAP = 64                # nesting of one JSON value (records written by the harness nest under 10)
MAX_INT_DIGITS = 4000         # Python refuses to convert longer digit strings (sys.int_info.default_max_str_digits)

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS_ONLY = bytes(b for b in range(256) if b not in b"[]{}")
_DEPTH_STEP = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")    # an opening bracket +1, a closing one -1 (see nesting)


class NotFound(HarnessError):
    """A run, evaluation or file the request names does not exist (or may not be read)."""


class Damaged(HarnessError):
    """A record that cannot be read: `name` (the file) and `why` (what is wrong with it, and the cap)."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"{name}: {why}")
        self.name, self.why = name, why


def open_regular(path: Path) -> BinaryIO | None:
    """`path` open for reading; None when it is missing. A link is never followed and anything but a
    regular file (a fifo, a device) is refused, without blocking on it. The console's one open call."""
    try:
        fd = checks.open_beneath(path.parent, path.name, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except (OSError, UnsafePathError) as exc:
        said = exc.strerror if isinstance(exc, OSError) else "it is a symbolic link"
        raise NotFound(f"{path.name} cannot be read: {said} (links are not followed)") from exc
    f = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        raise NotFound(f"{path.name} is not a regular file; not read")
    return f


def read_capped(path: Path, cap: int = TEXT_CAP) -> tuple[bytes, int] | None:
    """The first `cap` bytes of the regular file `path` and its whole size; None when it is missing."""
    f = open_regular(path)
    if f is None:
        return None
    with f:
        size = os.fstat(f.fileno()).st_size
        first = min(cap, size + 65_536)        # what fstat says, and some, so a small file costs a small buffer
        data = f.read(first)
        if len(data) == first < cap:           # it grew meanwhile: on up to the cap
            data += f.read(cap - first)
        return data, max(size, len(data))


def nesting(data: bytes, limit: int = DEPTH_CAP) -> int:
    """How deep the brackets of the JSON text `data` nest outside its strings; when that is at most
    `limit`, an upper bound of it (the count of opening brackets) may be given instead. All in C: a text
    with no more than `limit` opening brackets is counted only; any other has its strings cut out and
    the depth at each bracket summed."""
    openers = data.count(b"[") + data.count(b"{")
    if openers <= limit:
        return openers
    marks = _STRING.sub(b"", data).translate(_DEPTH_STEP, _BRACKETS_ONLY)
    # after k marks the depth is (sum of the k marks) - k: each mark is 2 (open) or 0 (close), minus 1
    return max(map(operator.sub, accumulate(marks), count(1)), default=0)


def _number(text: str) -> float | str:
    value = float(text)
    return value if math.isfinite(value) else text        # 1e999: kept as its text (answers carry no inf)


def _integer(text: str) -> int | str:
    return int(text) if len(text) <= MAX_INT_DIGITS else text


def parse_json(data: bytes, name: str) -> Any:
    """`data` parsed as JSON, depth checked first; raises `Damaged` saying what is wrong with `name`."""
    depth = nesting(data)
    if depth > DEPTH_CAP:
        raise Damaged(name, f"nested deeper than {DEPTH_CAP} levels (at least {depth}): not parsed")
    try:
        return json.loads(data, parse_float=_number, parse_int=_integer, parse_constant=str)
    except ValueError as exc:          # not JSON, not UTF-8 (JSONDecodeError and UnicodeDecodeError are ValueErrors)
        raise Damaged(name, f"not JSON ({str(exc)[:200]})") from exc
    except RecursionError as exc:      # nesting says it cannot happen; if it does, it is this record's damage
        raise Damaged(name, f"nested too deep to parse (over {DEPTH_CAP} levels)") from exc


def read_record(path: Path, cap: int = RECORD_CAP) -> Any:
    """The JSON record `path`, parsed; None when it is missing. Raises `Damaged` (with why) when it is a
    link, not a regular file, over `cap` bytes, not JSON or nested over `DEPTH_CAP` levels."""
    try:
        got = read_capped(path, cap + 1)
    except NotFound as exc:
        raise Damaged(path.name, str(exc).removeprefix(f"{path.name} ")) from exc
    if got is None:
        return None
    data, size = got
    if size > cap or len(data) > cap:
        raise Damaged(path.name, f"{max(size, len(data)):,} bytes, over the {cap:,}-byte cap for a record: not read")
    return parse_json(data, path.name)

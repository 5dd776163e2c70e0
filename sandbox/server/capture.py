"""One output stream of a command: counted in full, kept in bounded pieces (head, tail, error lines, a
saved copy of the first bytes). Memory stays flat whatever a command prints.

Lines that look like errors are looked for in the first `SCAN_MAX` bytes and in the kept tail; beyond
that budget the part that is dropped costs one newline count per read (memory speed), never a search
per keyword: 1 GiB of output is not read 17 times. The answer says how far the search went."""

from __future__ import annotations

import os
import re
from typing import BinaryIO

from sandbox._protocol import ErrorLine, StreamAnswer

SCAN_MAX = 16 * 1024 * 1024


class Capture:
    """One output stream: counted in full, kept in bounded pieces."""

    def __init__(self, head_max: int, tail_max: int, save_path: str | None, save_max: int,
                 error_re: re.Pattern[bytes] | None, error_max: int,
                 save_over: tuple[int, int] = (0, 0)) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.head_max, self.tail_max = head_max, tail_max
        self.total = 0
        self.lines = 0
        self.errors: list[ErrorLine] = []
        self.errors_total = 0
        self.error_re, self.error_max = error_re, error_max
        self.keywords = pattern_keywords(error_re.pattern) if error_re is not None else None
        self.carry = b""
        self.scanned = 0                         # bytes given to the error search so far
        self.save_path, self.save_max, self.saved = save_path, save_max, 0
        self.save_file: BinaryIO | None = None   # opened only once the output outgrows the head
        # the host's own budget (bytes, lines): an output it will cut is saved even when the head holds
        # all of it, so the model can always page what it was not shown
        self.save_over = save_over

    def feed_from(self, buf: bytearray, size: int) -> None:
        """`feed(buf[:size])` for a buffer the caller reuses for every read.

        Once the head is full, the saved copy complete and the search budget spent, only the tail's part
        of the read is copied and its newlines counted. (A fresh `bytes` per 1 MiB read cost more than
        the count: 220,000 page faults a GiB, half the reader's CPU, on the sandbox's one CPU.)
        """
        if not self._dropping():
            self.feed(bytes(memoryview(buf)[:size]))
            return
        self.total += size
        self.lines += buf.count(b"\n", 0, size)
        keep = min(size, 2 * self.tail_max)
        with memoryview(buf) as view:
            self.tail += view[size - keep:size]
        if len(self.tail) > 2 * self.tail_max:
            del self.tail[: len(self.tail) - self.tail_max]

    def _dropping(self) -> bool:
        """Whether what comes now only counts and passes through the tail."""
        return (len(self.head) >= self.head_max
                and (not self.save_path or (self.save_file is not None and self.saved >= self.save_max))
                and (self.error_re is None or self.scanned >= SCAN_MAX))

    def feed(self, chunk: bytes) -> None:
        before = self.total
        self.total += len(chunk)
        room = self.head_max - len(self.head)
        if room > 0:
            self.head += chunk[:room]
        rest = chunk[max(room, 0):]
        if rest:
            self.tail += rest[-2 * self.tail_max:]
            if len(self.tail) > 2 * self.tail_max:
                del self.tail[: len(self.tail) - self.tail_max]
        if self.save_path:
            self._save(chunk, before)
        room = SCAN_MAX - self.scanned if self.error_re is not None else 0
        if room > 0:                      # the search stops at exactly SCAN_MAX, wherever reads end
            part = chunk[:room]
            self.scanned += len(part)
            self._scan(part)
            self.lines += chunk.count(b"\n", len(part))
        else:
            self.lines += chunk.count(b"\n")

    def _save(self, chunk: bytes, before: int, force: bool = False) -> None:
        try:
            if self.save_file is None:
                if self.total <= self.head_max and not force:
                    return   # small outputs are never written to disk
                assert self.save_path is not None
                self.save_file = open(_create(self.save_path), "wb", buffering=0)
                self.saved = self.save_file.write(self.head[:before]) or 0
            if self.saved < self.save_max:
                self.saved += self.save_file.write(chunk[: self.save_max - self.saved]) or 0
        except OSError:
            # /tmp full or the file-size limit reached: keep what was saved, never fail the command
            self.save_max = self.saved
            if self.save_file is None:
                self.save_path = None

    def _scan(self, chunk: bytes) -> None:
        buf = self.carry + chunk
        end = buf.rfind(b"\n") + 1
        first_line = self.lines + 1
        if end:
            self.lines += buf.count(b"\n", 0, end)
            if self._may_match(buf):
                self._matches(buf, end, first_line)
        self.carry = buf[end:][-8192:]

    def _may_match(self, buf: bytes) -> bool:
        """False when `buf` holds none of the pattern's `(?#any-of:...)` words (so no line can match)."""
        if self.keywords is None:
            return True
        low = b"\n" + buf.lower()
        return any(word in low for word in self.keywords)

    def _matches(self, buf: bytes, end: int, first_line: int) -> None:
        assert self.error_re is not None
        if len(self.errors) >= self.error_max:
            self.errors_total += len(self.error_re.findall(buf, 0, end))
            return
        pos, line_no, counted_to = 0, first_line, 0
        while pos < end:
            m = self.error_re.search(buf, pos, end)
            if m is None:
                return
            start = buf.rfind(b"\n", 0, m.start()) + 1
            stop = buf.find(b"\n", m.start(), end)
            stop = end - 1 if stop < 0 else stop
            line_no += buf.count(b"\n", counted_to, start)
            counted_to = start
            self.errors_total += 1
            if len(self.errors) < self.error_max:
                self.errors.append(ErrorLine(line_no, buf[start:stop][:400]))
            pos = stop + 1

    def finish(self, keep_saved: bool) -> StreamAnswer:
        whole = self.scanned >= self.total
        if whole and self.carry and self.error_re is not None and self.error_re.search(self.carry):
            self.errors_total += 1
            if len(self.errors) < self.error_max:
                self.errors.append(ErrorLine(self.lines + 1, self.carry[:400]))
        last = (self.tail or self.head)[-1:]
        if self.total and last != b"\n":
            self.lines += 1
        if not whole and self.error_re is not None:
            self._scan_tail()
        if self.total <= len(self.head) + len(self.tail):
            head, tail, truncated = bytes(self.head + self.tail), b"", False
        else:
            head, tail, truncated = bytes(self.head), bytes(self.tail[-self.tail_max:]), True
        saved_path = None
        over_bytes, over_lines = self.save_over
        cut = truncated or (over_bytes and self.total > over_bytes) or (over_lines and self.lines > over_lines)
        if cut and keep_saved and self.save_file is None and self.save_path:
            self._save(b"", self.total, force=True)
        if self.save_file is not None:
            self.save_file.close()
            assert self.save_path is not None
            if cut and keep_saved and self.saved:
                saved_path = self.save_path
            else:
                os.unlink(self.save_path)
        return StreamAnswer(head=head, tail=tail, total_bytes=self.total, total_lines=self.lines,
                            truncated=truncated, error_lines=tuple(self.errors),
                            error_lines_total=self.errors_total, saved_path=saved_path,
                            saved_bytes=self.saved if saved_path else 0,
                            scanned_bytes=-1 if whole else self.scanned)

    def _scan_tail(self) -> None:
        """The search beyond the budget: the kept tail's whole lines (those a reader sees at the end)."""
        assert self.error_re is not None
        tail = bytes(self.tail[-self.tail_max:])
        searched = max(0, self.scanned - (self.total - len(tail)))   # the tail's part the search saw
        cut = tail.find(b"\n", searched)      # the line under way there (or the tail's first) is partial
        if cut < 0:
            return
        body = tail[cut + 1:]
        if not body:
            return
        ends_open = not body.endswith(b"\n")
        first_line = self.lines - body.count(b"\n") - (1 if ends_open else 0) + 1
        if not ends_open:
            body = body[:-1]
        for number, line in enumerate(body.split(b"\n"), first_line):
            if self.error_re.search(line):
                self.errors_total += 1
                if len(self.errors) < self.error_max:
                    self.errors.append(ErrorLine(number, line[:400]))


def _create(path: str) -> int:
    """A new file at `path`, never through a link planted there; its folder made again when missing (the
    agent removed it since the server made it, see loop._MADE)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    try:
        return os.open(path, flags, 0o644)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return os.open(path, flags, 0o644)


def pattern_keywords(pattern: bytes) -> list[bytes] | None:
    """The words of a pattern's `(?#any-of:w1|w2|^w3)` comment, as lowercase bytes; `^w` = line start."""
    m = re.search(rb"\(\?#any-of:([^)]*)\)", pattern)
    if m is None:
        return None
    words = [w.lower() for w in m.group(1).split(b"|") if w]
    return [b"\n" + w[1:] if w.startswith(b"^") else w for w in words] or None

"""The channel's error-line scan: every line the error pattern matches is found, fast, in any flood.

These drive the channel server's `sandbox/server/capture.py` directly (it is pure Python); the
end-to-end path through a container is covered in test_output.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.tools.shell.truncation import ERROR_PATTERN, render_stream
from sandbox._protocol import StreamAnswer
from sandbox.api import StreamCapture
from sandbox.server import capture
from sandbox.server.capture import Capture, pattern_keywords


def _scan(data: bytes, pattern: str = ERROR_PATTERN, chunk: int = 65536) -> StreamAnswer:
    cap = Capture(32768, 32768, None, 0, re.compile(pattern.encode(), re.MULTILINE), 50)
    for i in range(0, len(data), chunk):
        cap.feed(data[i:i + chunk])
    return cap.finish(False)


MATCHING = ["ERROR: something", "Traceback (most recent call last):", "test_x FAILED", "Failure in x",
            "FATAL oops", "kernel panic", "Permission denied", "Connection refused", "command not found",
            "ls: x: No such file or directory", "cannot open", "Could not resolve", "Unable to start",
            "Segmentation fault (core dumped)", "AssertionError", "assert x == 1", "E   assert 1 == 2",
            "E\tbad", "ValueError: bad value", "FAIL: test_x (tests.T)", "1 failed, 2 errors in 0.1s",
            "KeyError: 'x'", "RuntimeException thrown"]


@pytest.mark.parametrize("line", MATCHING)
def test_every_kind_of_error_line_is_found_inside_a_flood(line: str) -> None:
    assert re.search(ERROR_PATTERN, line, re.MULTILINE), line      # the pattern itself matches it
    filler = b"harmless output line\n" * 20000
    got = _scan(filler + line.encode() + b"\n" + filler)
    assert got.error_lines_total == 1
    number, text = got.error_lines[0]
    assert number == 20001 and text.decode() == line


def test_lines_without_error_words_are_not_reported() -> None:
    got = _scan(b"all good\nEverything passed\nexit early\n" * 1000)
    assert got.error_lines_total == 0 and got.total_lines == 3000


def test_a_pattern_without_the_word_list_still_scans_everything() -> None:
    got = _scan(b"fine\n" * 100 + b"custom-marker here\n", pattern=r"custom-marker")
    assert got.error_lines_total == 1 and got.error_lines[0][0] == 101


def test_scanning_a_flood_without_errors_counts_every_line_and_finds_none() -> None:
    data = b"harness benchmark line\n" * 500_000          # 11 MiB; its speed is bench/bench_sandbox.py's job
    got = _scan(data)
    assert got.total_lines == 500_000 and got.error_lines_total == 0


def test_the_word_list_is_read_from_the_pattern() -> None:
    assert pattern_keywords(b"(?i)(?#any-of:error|^e)(x)") == [b"error", b"\ne"]
    assert pattern_keywords(b"plain") is None


@pytest.mark.parametrize("chunk", [65536, 100_003, 1 << 20])
def test_beyond_the_scan_budget_only_newlines_are_counted_but_the_tail_is_still_searched(
        monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(capture, "SCAN_MAX", 1 << 20)
    early = b"ok\n" * 1000 + b"ERROR: early\n"
    middle = b"harness benchmark line\n" * 200_000 + b"ERROR: lost in the middle\n" + b"fine\n" * 100_000
    late = b"more\n" * 10 + b"Traceback (most recent call last):\nE   assert 1 == 2\nend"
    data = early + middle + late
    got = _scan(data, chunk=chunk)
    lines = data.split(b"\n")
    assert got.total_lines == len(lines) and got.total_bytes == len(data)
    assert got.scanned_bytes == 1 << 20          # exactly the budget, wherever the reads ended
    found = {(n, t) for n, t in got.error_lines}
    assert (1001, b"ERROR: early") in found
    assert (len(lines) - 2, b"Traceback (most recent call last):") in found
    assert (len(lines) - 1, b"E   assert 1 == 2") in found
    assert not any(b"middle" in t for _, t in found) and got.error_lines_total == 3
    for n, text in found:
        assert lines[n - 1] == text
    small = _scan(b"ERROR: x\n" * 10)
    assert small.scanned_bytes == -1 and small.error_lines_total == 10


def test_the_observation_says_how_far_error_lines_were_looked_for() -> None:
    cap = StreamCapture(head="a\n" * 10, tail="b\n" * 10, total_bytes=40 << 20, total_lines=9_000_000,
                        truncated=True, error_lines=((5, "ERROR x"),), error_lines_total=1,
                        scanned_bytes=16 << 20)
    text = render_stream("stdout", cap, 50, 4000, 40, labelled=False)
    assert "lines that look like errors (1 of 1 found in its first 16.0 MiB and its last lines)" in text


@pytest.mark.parametrize("save", [False, True])
def test_reads_into_a_reused_buffer_give_the_answer_fresh_chunks_give(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path, save: bool) -> None:
    """`feed_from` (the read loop's path) against `feed` over the same reads: head, tail, counts, error
    lines, the saved copy and how far the search went, past the head, the save and the search budget."""
    monkeypatch.setattr(capture, "SCAN_MAX", 50_000)
    pieces = [b"fine line\n", b"ERROR: boom\n", b"x" * 700, b"\n", b"Traceback (most recent call last):\n"]
    data = b"".join(pieces[(i * 7919) % 5] for i in range(40_000))   # ~1 MB
    answers = []
    for way in ("feed", "feed_from"):
        path = f"{tmp_path}/{way}.txt" if save else None
        cap = Capture(4096, 4096, path, 100_000, re.compile(ERROR_PATTERN.encode(), re.MULTILINE), 50)
        buf = bytearray(65536)
        for start in range(0, len(data), 9973):
            part = data[start:start + 9973]
            if way == "feed":
                cap.feed(part)
            else:
                buf[:len(part)] = part
                cap.feed_from(buf, len(part))
        answer = cap.finish(True)
        saved = Path(answer.saved_path).read_bytes() if answer.saved_path else None
        answers.append((answer._replace(saved_path=None), saved))
    assert answers[0] == answers[1]
    assert answers[0][0].truncated and answers[0][0].scanned_bytes == 50_000 and answers[0][0].error_lines_total
    assert (answers[0][1] == data[:100_000]) if save else answers[0][1] is None

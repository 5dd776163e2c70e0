"""The channel's error-line scan: every line the error pattern matches is found, fast, in any flood.

These drive the channel server's `sandbox/server/capture.py` directly (it is pure Python); the
end-to-end path through a container is covered in test_output.py.
"""

from __future__ import annotations

import re

import pytest

from harness.tools.shell.truncation import ERROR_PATTERN
from sandbox._protocol import StreamAnswer
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

"""The shell observation: status line, errors first, head and tail, how much was cut and where it is."""

from __future__ import annotations

import re

from harness.tools.shell.truncation import NETWORK_HINT, Budget, format_observation, status_line
from sandbox.api import ExecResult, StreamCapture

EMPTY = StreamCapture(head="", tail="", total_bytes=0, total_lines=0, truncated=False)
SAVED = "/tmp/harness/output/cmd-3.stdout.txt"
SMALL = Budget(max_lines=20, max_bytes=2000, error_lines=5)


def _stream(text: str) -> StreamCapture:
    return StreamCapture(head=text, tail="", total_bytes=len(text.encode()), total_lines=text.count("\n"),
                         truncated=False)


def _long_stream(saved: bool = True, saved_bytes: int = 100_000) -> StreamCapture:
    head = "".join(f"line {i}\n" for i in range(1, 4001))
    tail = "ne 8999\n" + "".join(f"line {i}\n" for i in range(9000, 10001))     # starts mid-line, as cut
    return StreamCapture(head=head, tail=tail, total_bytes=100_000, total_lines=10_000, truncated=True,
                         error_lines=((5000, "Traceback (most recent call last):"), (5003, "ValueError: bad")),
                         error_lines_total=2, saved_path=SAVED if saved else None,
                         saved_bytes=saved_bytes if saved else 0)


def _result(stdout: StreamCapture = EMPTY, stderr: StreamCapture = EMPTY, code: int = 0,
            timed_out: bool = False, duration: float = 1.234, leftovers: int = 0) -> ExecResult:
    return ExecResult(command="cmd", exit_code=code, duration=duration, timed_out=timed_out, stdout=stdout,
                      stderr=stderr, killed_leftovers=leftovers)


def test_status_line_gives_exit_code_duration_and_stream_sizes() -> None:
    line = status_line(_result(_stream("a\nb\n"), _stream("x" * 3000 + "\n"), code=2))
    assert line == "[exit 2 · 1.23s · stdout 4 B (2 lines) · stderr 2.9 KiB (1 line)]"


def test_short_output_is_shown_whole_after_the_status_line() -> None:
    text = format_observation(_result(_stream("hello\nworld\n")))
    assert text == "[exit 0 · 1.23s · stdout 12 B (2 lines) · stderr 0 B (0 lines)]\nhello\nworld"


def test_no_output_says_whether_the_command_succeeded() -> None:
    assert format_observation(_result()).endswith("\n(no output: the command succeeded)")
    assert format_observation(_result(code=1)).endswith("\n(no output: the command failed with exit code 1)")


def test_errors_come_first_then_head_then_the_omission_note_then_tail() -> None:
    text = format_observation(_result(_long_stream(), code=1), SMALL)
    errors = text.index("--- stdout: lines that look like errors (2 of 2) ---\n5000: Traceback")
    head = text.index("--- stdout: lines 1-10 of 10000 ---\nline 1\n")
    note = text.index("[... 9980 line(s) of stdout omitted; the full output is saved at " + SAVED)
    tail = text.index("--- stdout: lines 9991-10000 of 10000 ---\nline 9991\n")
    assert errors < head < note < tail
    assert text.endswith("line 10000")
    assert f'view(path="{SAVED}", line=11)' in text and f'search(pattern=..., path="{SAVED}")' in text


def test_omitted_count_adds_up_with_what_is_shown() -> None:
    text = format_observation(_result(_long_stream()), SMALL)
    shown = [int(n) for n in re.findall(r"^line (\d+)$", text, re.MULTILINE)]
    omitted = int(re.search(r"\[\.\.\. (\d+) line\(s\)", text).group(1))  # type: ignore[union-attr]
    assert len(shown) + omitted == 10_000
    assert shown == list(range(1, 11)) + list(range(9991, 10001))


def test_a_partly_saved_output_says_how_much_was_saved() -> None:
    text = format_observation(_result(_long_stream(saved_bytes=50_000)), SMALL)
    assert "the first 48.8 KiB of it is saved at " + SAVED in text


def test_without_a_saved_copy_the_note_says_how_to_see_the_rest() -> None:
    text = format_observation(_result(_long_stream(saved=False)), SMALL)
    assert "line(s) of stdout omitted; rerun with less output (e.g. pipe through grep, head or tail)" in text


def test_error_lines_are_capped_and_counted() -> None:
    many = tuple((i, f"E   assert {i}") for i in range(1, 60))
    cap = StreamCapture(head="x\n" * 3000, tail="x\n" * 3000, total_bytes=50_000, total_lines=25_000,
                        truncated=True, error_lines=many, error_lines_total=250)
    text = format_observation(_result(cap), SMALL)
    assert "lines that look like errors (5 of 250)" in text
    assert "5: E   assert 5" in text and "6: E   assert 6" not in text


def test_a_huge_single_line_is_cut_in_the_middle_with_a_count() -> None:
    line = "a" * 100_000
    cap = StreamCapture(head=line[:32768], tail=line[-32768:], total_bytes=100_000, total_lines=1, truncated=True)
    text = format_observation(_result(cap), SMALL)
    assert len(text) < 3 * SMALL.max_bytes
    assert "characters of this line omitted" in text


def test_timeout_says_it_was_killed_after_n_seconds_and_shows_partial_output() -> None:
    text = format_observation(_result(_stream("partial\n"), code=137, timed_out=True, duration=30.02))
    assert text.startswith("[timeout · 30.02s · ")
    assert "the command was killed after its 30s timeout (SIGTERM to its process group, SIGKILL after a grace " \
           "period); partial output below." in text
    assert text.endswith("partial")


def test_a_timeout_with_no_output_is_not_called_a_success() -> None:
    text = format_observation(_result(code=143, timed_out=True))
    assert "command succeeded" not in text and "(no output: the command failed with exit code 143)" in text


def test_network_failures_get_the_no_network_hint() -> None:
    for message in ("OSError: [Errno 101] Network is unreachable",
                    "socket.gaierror: [Errno -3] Temporary failure in name resolution",
                    "fatal: unable to access 'https://example.org/repo.git/': Could not resolve host",
                    "WARNING: Retrying ... Failed to establish a new connection"):
        assert format_observation(_result(stderr=_stream(message + "\n"), code=1)).endswith(NETWORK_HINT)
    assert NETWORK_HINT not in format_observation(_result(stderr=_stream("ValueError: bad\n"), code=1))


def test_the_network_hint_is_found_in_error_lines_of_a_truncated_stream() -> None:
    cap = StreamCapture(head="x\n" * 3000, tail="x\n" * 3000, total_bytes=50_000, total_lines=25_000,
                        truncated=True, error_lines=((7, "Network is unreachable"),), error_lines_total=1)
    assert format_observation(_result(cap, code=1), SMALL).endswith(NETWORK_HINT)


def test_both_streams_share_the_budget_and_are_labelled() -> None:
    text = format_observation(_result(_long_stream(), _long_stream(), code=1), SMALL)
    assert "--- stdout: lines 1-" in text and "--- stderr: lines 1-" in text
    assert len(text) < 3 * SMALL.max_bytes


def test_leftover_processes_are_mentioned() -> None:
    text = format_observation(_result(_stream("ok\n"), leftovers=2))
    assert "note: 2 background process(es) the command left running were stopped" in text

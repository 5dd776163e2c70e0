"""Per-test results from a pytest log, and the FAIL_TO_PASS / PASS_TO_PASS verdict.

Parsing and grading follow SWE-bench's harness (`log_parsers/python.py: parse_log_pytest` and
`grading.py`) so that a verdict here means the same as a verdict there:

- a result line is either ``STATUS test_id`` (pytest's ``-rA`` short summary, e.g.
  ``FAILED tests/test_x.py::test_y - AssertionError``) or ``test_id STATUS`` (``-v`` output, e.g.
  ``tests/test_x.py::test_y PASSED [ 50%]``); STATUS is one of PASSED, FAILED, SKIPPED, ERROR, XFAIL
  (XPASS is not a status, as in SWE-bench); ``SKIPPED [2] file:line: reason`` lines are skip
  summaries, not tests; ANSI colour codes are removed first; the last line about a test wins.
- a FAIL_TO_PASS test succeeds when it PASSED or XFAILed; a PASS_TO_PASS test succeeds when it
  PASSED, XFAILed or was SKIPPED; a test missing from the log failed.
- resolved iff every FAIL_TO_PASS and every PASS_TO_PASS test succeeded.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


class TestStatus(enum.StrEnum):
    PASSED = "PASSED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    ERROR = "ERROR"
    XFAIL = "XFAIL"


_STATUSES = "|".join(s.value for s in TestStatus)
_STATUS_FIRST = re.compile(rf"^({_STATUSES})\s+(\S+)")
_TEST_FIRST = re.compile(rf"^(\S+)\s+({_STATUSES})(?:\s|$)")
_SKIP_COUNT = re.compile(r"^\[\d+\]")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

_PASSING = {TestStatus.PASSED.value, TestStatus.XFAIL.value}
_MAINTAINED = _PASSING | {TestStatus.SKIPPED.value}


def parse_pytest_log(log: str) -> dict[str, str]:
    """Map each pytest node id found in `log` to its status (a `TestStatus` value)."""
    results: dict[str, str] = {}
    for raw in log.splitlines():
        line = _ANSI.sub("", raw).rstrip()
        parsed = _parse_line(line)
        if parsed is not None:
            results[parsed[0]] = parsed[1]
    return results


def _parse_line(line: str) -> tuple[str, str] | None:
    match = _STATUS_FIRST.match(line)
    if match:
        status, test = match.groups()
        if status == TestStatus.SKIPPED.value and _SKIP_COUNT.match(test):
            return None
        return test, status
    match = _TEST_FIRST.match(line)
    if match:
        return match.group(1), match.group(2)
    return None


@dataclass(frozen=True)
class TestsVerdict:
    """Which of the required tests succeeded, in SWE-bench's `tests_status` shape."""

    __test__ = False      # not a pytest test class

    fail_to_pass_success: tuple[str, ...]
    fail_to_pass_failure: tuple[str, ...]
    pass_to_pass_success: tuple[str, ...]
    pass_to_pass_failure: tuple[str, ...]

    @property
    def resolved(self) -> bool:
        return not self.fail_to_pass_failure and not self.pass_to_pass_failure

    def to_dict(self) -> dict[str, Any]:
        empty: dict[str, list[str]] = {"success": [], "failure": []}
        return {
            "FAIL_TO_PASS": {"success": list(self.fail_to_pass_success),
                             "failure": list(self.fail_to_pass_failure)},
            "PASS_TO_PASS": {"success": list(self.pass_to_pass_success),
                             "failure": list(self.pass_to_pass_failure)},
            "FAIL_TO_FAIL": dict(empty), "PASS_TO_FAIL": dict(empty),
        }


def judge(status: dict[str, str], fail_to_pass: Iterable[str], pass_to_pass: Iterable[str]) -> TestsVerdict:
    """The verdict of a status map (from `parse_pytest_log`) against the required tests."""
    f2p = list(fail_to_pass)
    p2p = list(pass_to_pass)
    return TestsVerdict(
        fail_to_pass_success=tuple(t for t in f2p if status.get(t) in _PASSING),
        fail_to_pass_failure=tuple(t for t in f2p if status.get(t) not in _PASSING),
        pass_to_pass_success=tuple(t for t in p2p if status.get(t) in _MAINTAINED),
        pass_to_pass_failure=tuple(t for t in p2p if status.get(t) not in _MAINTAINED))

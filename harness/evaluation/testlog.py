"""The FAIL_TO_PASS / PASS_TO_PASS verdict of a status map, decided as SWE-bench's grading decides it.

The status map comes from a log parser (`harness.evaluation.log_parsers`); `parse_pytest_log` is its
pytest parser. The rule is that of `swebench/harness/grading.py` (commit 7a21e05, August 2026, in its
default PASS_AND_FAIL mode):

- a test *passed* when its status is PASSED or XFAIL; it *failed* when it is missing from the map or
  its status is FAILED, ERROR or SKIPPED (a skipped FAIL_TO_PASS test is no resolution);
- a PASS_TO_PASS test is *maintained* when it passed or was SKIPPED (a skip is no regression);
- any other status (one a parser read verbatim that is none of these, e.g. ``XPASS``) is *neither*:
  the test lands in neither list and is not counted at all;
- a required id that is missing and has more ``[`` than ``]`` (an id the dataset truncated inside its
  parameters) stands for the tests whose ids start with it, provided they all agree on passed or not;
  the first of them in the log decides;
- resolved (RESOLVED_FULL) iff no FAIL_TO_PASS test and no PASS_TO_PASS test failed. The official
  code computes success / (success + failure) per list and takes an empty denominator as 1, so an
  empty list, or a list whose tests are all *neither*, does not stand in the way. RESOLVED_PARTIAL:
  some but not all FAIL_TO_PASS tests passed and no PASS_TO_PASS test failed.

SWE-bench releases before August 2026 (#598) treated SKIPPED as *neither* in both lists, so there a
patch that made every FAIL_TO_PASS test skip was resolved; this module follows the newer rule.

Before a log is judged, `guard` asks whether it describes a run of the suite at all (SWE-bench 5.0's
`get_logs_eval` guards, #620, and one more): a patch controls code that runs inside the test runner
(a conftest.py, the package's own modules), so it can print ``PASSED`` lines of its own and end the
process. A rejected run is unresolved, with its reason:

- ``no_sign_suite_ran``: the runner's own summary line, with a count that is not zero, is missing
  (pytest's ``N passed in 1.2s``, django's ``Ran N tests``, sympy's ``tests finished: N passed``;
  `log_parsers.runner_summary`): the runner stopped before the end of the suite, whatever the log says;
- ``no_test_results``: the parser found no test in the log (5.0: no status map and no sign the suite
  ran is an invalid run, not a pass);
- ``exit_code_contradicts_log``: the test command exited non-zero but the log reports no failed or
  erroring test (5.0's rule: the log is not describing the run that happened);
- ``runner_interrupted``: a pytest run whose exit status is 2 to 5 (interrupted, internal error, usage
  error, no tests collected);
- ``tests_not_reached``: a SWE-bench 5.0 row's own eval script (`eval_scripts`) ended before its
  start-of-test-output marker (5.0: a log without both markers is no run; `script_stopped`).

The exit status is the test command's own, as Docker reports it for the command (outside the output),
so no line a patch prints can change it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.evaluation.log_parsers import TestStatus, parse_log, runner_summary

__all__ = ["Rejection", "TestStatus", "TestsVerdict", "guard", "judge", "parse_pytest_log", "script_stopped"]

_PASSED = frozenset({TestStatus.PASSED.value, TestStatus.XFAIL.value})
_MAINTAINED = _PASSED | {TestStatus.SKIPPED.value}
_FAILED = frozenset({TestStatus.FAILED.value, TestStatus.ERROR.value, TestStatus.SKIPPED.value})


def parse_pytest_log(log: str) -> dict[str, str]:
    """Map each pytest node id in `log` (``-rA`` short summary lines) to its status; the "pytest"
    parser of `log_parsers`."""
    return parse_log("pytest", log)


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
        """RESOLVED_FULL: nothing failed (tests counted as neither, and empty lists, do not count)."""
        return not self.fail_to_pass_failure and not self.pass_to_pass_failure

    @property
    def resolution(self) -> str:
        """SWE-bench's resolution status: RESOLVED_FULL, RESOLVED_PARTIAL or RESOLVED_NO."""
        if self.resolved:
            return "RESOLVED_FULL"
        if self.fail_to_pass_success and not self.pass_to_pass_failure:
            return "RESOLVED_PARTIAL"
        return "RESOLVED_NO"

    def to_dict(self) -> dict[str, Any]:
        empty: dict[str, list[str]] = {"success": [], "failure": []}
        return {
            "FAIL_TO_PASS": {"success": list(self.fail_to_pass_success),
                             "failure": list(self.fail_to_pass_failure)},
            "PASS_TO_PASS": {"success": list(self.pass_to_pass_success),
                             "failure": list(self.pass_to_pass_failure)},
            "FAIL_TO_FAIL": dict(empty), "PASS_TO_FAIL": dict(empty),
        }


def _status_of(test: str, status: dict[str, str]) -> str | None:
    """The status that stands for `test`: its own, or for a truncated parametrised id the status of
    the first test it prefixes when all such tests agree on passed or not; None when missing."""
    if test in status:
        return status[test]
    if test.count("[") > test.count("]"):
        prefixed = [value for name, value in status.items() if name.startswith(test)]
        if prefixed and len({value in _PASSED for value in prefixed}) == 1:
            return prefixed[0]
    return None


def _sort(tests: Iterable[str], status: dict[str, str], succeeded: frozenset[str]
          ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(successes, failures) of `tests`; a test in neither is left out of both."""
    success: list[str] = []
    failure: list[str] = []
    for test in tests:
        value = _status_of(test, status)
        if value in succeeded:
            success.append(test)
        elif value is None or value in _FAILED:
            failure.append(test)
    return tuple(success), tuple(failure)


def judge(status: dict[str, str], fail_to_pass: Iterable[str], pass_to_pass: Iterable[str]) -> TestsVerdict:
    """The verdict of a status map (from a log parser) against the required tests, by the rule above."""
    f2p_success, f2p_failure = _sort(fail_to_pass, status, _PASSED)
    p2p_success, p2p_failure = _sort(pass_to_pass, status, _MAINTAINED)
    return TestsVerdict(fail_to_pass_success=f2p_success, fail_to_pass_failure=f2p_failure,
                        pass_to_pass_success=p2p_success, pass_to_pass_failure=p2p_failure)


@dataclass(frozen=True)
class Rejection:
    """Why a test run's log is not taken as a run of the suite (`reason` is one of the codes above)."""

    reason: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "detail": self.detail}


_PYTEST_EXITS = {2: "interrupted", 3: "an internal error", 4: "a usage error", 5: "no tests collected"}


def guard(parser: str, log: str, status: dict[str, str], exit_code: int) -> Rejection | None:
    """Why the log of a test run (its status map `status`, the command's `exit_code`) does not describe a
    run of the suite, or None when it does; by the rules above, in that order."""
    summary = runner_summary(parser, log)
    if summary is not None and summary[1] is None:
        return Rejection("no_sign_suite_ran", f"the log has no summary line of the test runner ({summary[0]}, "
                                              "with a count that is not zero): the suite did not run to its "
                                              f"end (exit status {exit_code}), so no status in the log is taken")
    if not status:
        return Rejection("no_test_results", f"the {parser!r} log parser found no test in the log "
                                            f"(exit status {exit_code})")
    failing = {TestStatus.FAILED.value, TestStatus.ERROR.value}
    if exit_code != 0 and not failing & set(status.values()):
        return Rejection("exit_code_contradicts_log", f"the test command exited {exit_code} but the log "
                                                      "reports no failed or erroring test")
    if summary is not None and summary[0].startswith("pytest") and exit_code in _PYTEST_EXITS:
        return Rejection("runner_interrupted", f"pytest exited {exit_code}: {_PYTEST_EXITS[exit_code]}")
    return None


def script_stopped(exit_code: int) -> Rejection:
    """The rejection of a run whose eval script ended (with `exit_code`) before its test command."""
    return Rejection("tests_not_reached", f"the row's eval script ended (exit status {exit_code}) before its "
                                          "start-of-test-output marker: its test command never ran")

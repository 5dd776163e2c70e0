"""Per-test results are read from pytest logs exactly as SWE-bench's harness reads them."""

from harness.evaluation.testlog import judge, parse_pytest_log

RA_LOG = """\
============================= test session starts ==============================
collected 6 items

tests/test_core.py ..F.sx                                                [100%]

=================================== FAILURES ===================================
___________________________ test_top_words_returns_n_items ___________________________
    def test_top_words_returns_n_items():
>       assert top_words(text, 2) == [("a", 3), ("b", 2)]
E       AssertionError: assert [('a', 3)] == [('a', 3), ('b', 2)]
==================================== PASSES ====================================
=========================== short test summary info ============================
PASSED tests/test_core.py::test_count_words_ignores_case
PASSED tests/test_core.py::test_param[a b-1]
FAILED tests/test_core.py::test_top_words_returns_n_items - AssertionError: assert [('a', 3)] == ...
ERROR tests/test_core.py::test_fixture_broken - RuntimeError: boom
SKIPPED [1] tests/test_core.py:20: needs network
XFAIL tests/test_core.py::test_known_bug - reason: not fixed yet
\x1b[32mPASSED\x1b[0m tests/test_other.py::test_coloured
=============== 1 failed, 2 passed, 1 skipped, 1 xfailed in 0.05s ===============
"""


def test_short_summary_lines_give_each_tests_status():
    status = parse_pytest_log(RA_LOG)
    assert status["tests/test_core.py::test_count_words_ignores_case"] == "PASSED"
    assert status["tests/test_core.py::test_top_words_returns_n_items"] == "FAILED"
    assert status["tests/test_core.py::test_fixture_broken"] == "ERROR"
    assert status["tests/test_core.py::test_known_bug"] == "XFAIL"
    assert status["tests/test_other.py::test_coloured"] == "PASSED"


def test_skip_summary_lines_are_not_tests():
    status = parse_pytest_log(RA_LOG)
    assert not any(name.startswith("[") for name in status)


def test_parametrized_id_with_space_is_cut_at_the_space_like_swebench():
    assert "tests/test_core.py::test_param[a" in parse_pytest_log(RA_LOG)


def test_verbose_lines_with_status_after_the_id_are_read():
    log = "tests/test_x.py::test_a PASSED   [ 50%]\ntests/test_x.py::test_b FAILED   [100%]\n"
    assert parse_pytest_log(log) == {"tests/test_x.py::test_a": "PASSED", "tests/test_x.py::test_b": "FAILED"}


def test_resolved_only_when_every_required_test_succeeds():
    status = {"t::f2p": "PASSED", "t::p2p": "PASSED", "t::skipped": "SKIPPED", "t::xfail": "XFAIL"}
    assert judge(status, ["t::f2p", "t::xfail"], ["t::p2p", "t::skipped"]).resolved


def test_missing_or_skipped_fail_to_pass_test_counts_as_failure():
    verdict = judge({"t::p2p": "PASSED", "t::skipped": "SKIPPED"}, ["t::missing", "t::skipped"], ["t::p2p"])
    assert not verdict.resolved
    assert verdict.fail_to_pass_failure == ("t::missing", "t::skipped")
    assert verdict.to_dict()["PASS_TO_PASS"] == {"success": ["t::p2p"], "failure": []}


def test_broken_pass_to_pass_test_means_unresolved():
    verdict = judge({"t::f2p": "PASSED", "t::p2p": "ERROR"}, ["t::f2p"], ["t::p2p"])
    assert not verdict.resolved and verdict.pass_to_pass_failure == ("t::p2p",)

"""Per-test results are read from pytest logs, and judged, exactly as SWE-bench's harness does.

The parser and the rule follow SWE-bench at commit 7a21e05 (August 2026); tests/evaluation/test_log_parsers.py
checks every parser on real logs.
"""

from harness.evaluation.log_parsers import parse_log
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


def test_coloured_lines_are_not_read_by_the_pytest_parser_as_in_swebench():
    """The official pytest parser strips no colour codes (the old parser here did): a coloured line
    does not start with its status. Only the pytest_v2 parser (astropy, scikit-learn, sphinx) strips them."""
    assert "tests/test_other.py::test_coloured" not in parse_pytest_log(RA_LOG)
    assert parse_log("pytest_v2", RA_LOG)["tests/test_other.py::test_coloured"] == "PASSED"


def test_skip_summary_lines_are_not_tests():
    status = parse_pytest_log(RA_LOG)
    assert not any(name.startswith("[") for name in status)


def test_parametrized_id_with_space_is_cut_at_the_space_like_swebench():
    assert "tests/test_core.py::test_param[a" in parse_pytest_log(RA_LOG)


def test_verbose_lines_are_ignored_by_the_pytest_parser_and_read_by_pytest_v2_when_they_end_with_the_status():
    """The official pytest parser reads only ``STATUS id`` lines (the old parser here read ``-v`` lines
    too); pytest_v2 reads ``id STATUS`` lines, but only when the status ends the line (older pytest)."""
    log = "tests/test_x.py::test_a PASSED   [ 50%]\ntests/test_x.py::test_b FAILED\n"
    assert parse_pytest_log(log) == {}
    assert parse_log("pytest_v2", log) == {"tests/test_x.py::test_b": "FAILED"}


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


def test_skipped_pass_to_pass_test_is_maintained_but_a_skipped_fail_to_pass_test_failed():
    verdict = judge({"t::f2p": "SKIPPED", "t::p2p": "SKIPPED"}, ["t::f2p"], ["t::p2p"])
    assert verdict.fail_to_pass_failure == ("t::f2p",) and verdict.pass_to_pass_success == ("t::p2p",)


def test_unknown_status_counts_as_neither_and_an_empty_list_does_not_block_resolution():
    """SWE-bench computes success / (success + failure) per list, 1 when both are empty: a test whose
    status is none of the five is left out of both lists, and so does not stand in the way."""
    verdict = judge({"t::odd": "XPASS", "t::p2p": "PASSED"}, ["t::odd"], ["t::p2p"])
    assert verdict.fail_to_pass_success == () and verdict.fail_to_pass_failure == ()
    assert verdict.resolved and verdict.resolution == "RESOLVED_FULL"
    assert judge({}, [], []).resolved
    assert not judge({}, ["t::missing"], []).resolved        # positive control: a missing test fails


def test_some_fail_to_pass_tests_passing_is_partial_resolution():
    status = {"t::a": "PASSED", "t::b": "FAILED", "t::p": "PASSED"}
    assert judge(status, ["t::a", "t::b"], ["t::p"]).resolution == "RESOLVED_PARTIAL"
    assert judge(status, ["t::a", "t::b"], ["t::b"]).resolution == "RESOLVED_NO"
    assert judge(status, ["t::b"], ["t::p"]).resolution == "RESOLVED_NO"


def test_truncated_parametrised_id_stands_for_the_tests_it_prefixes_when_they_agree():
    status = {"t::f[log(x)]": "PASSED", "t::f[log(y)]": "XFAIL", "t::g[1]": "PASSED", "t::g[2]": "FAILED"}
    assert judge(status, ["t::f[log("], []).fail_to_pass_success == ("t::f[log(",)
    assert judge(status, ["t::g["], []).fail_to_pass_failure == ("t::g[",)      # they disagree
    assert judge(status, ["t::f[log(x)"], []).resolved
    assert not judge(status, ["t::f"], []).resolved      # no unclosed bracket: exact ids only

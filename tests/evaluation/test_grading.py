"""How runs combine into a verdict, and how a patch is staged with the tests put back."""

from __future__ import annotations

from harness.evaluation.grading import Grade, TestRun, prepare_tree
from harness.evaluation.tasks import load_task
from harness.evaluation.testlog import judge

from .conftest import TASKS


def _run(resolved: bool, timed_out: bool = False) -> TestRun:
    status = {"t::a": "PASSED" if resolved else "FAILED"}
    return TestRun(exit_code=0 if resolved else 1, duration=1.0, timed_out=timed_out, status=status,
                   verdict=judge(status, ["t::a"], []), output="")


def test_differing_runs_are_flaky_and_not_resolved():
    grade = Grade(patch_exists=True, patch_applied=True, runs=[_run(True), _run(False), _run(True)])
    assert grade.flaky and not grade.resolved
    assert grade.report("x")["x"]["runs"][1] == {"resolved": False, "exit_code": 1, "timed_out": False,
                                                 "duration": 1.0}


def test_agreeing_runs_are_resolved_and_a_timeout_is_not():
    assert Grade(patch_exists=True, patch_applied=True, runs=[_run(True), _run(True)]).resolved
    timed_out = Grade(patch_exists=True, patch_applied=True, runs=[_run(True, timed_out=True)])
    assert not timed_out.resolved
    assert not Grade(patch_exists=True, patch_applied=False).resolved


def test_model_edits_to_the_tests_are_replaced_by_the_base_tests_plus_the_test_patch(tmp_path):
    task = load_task(TASKS / "cart")
    cheat = ("--- a/tests/test_cart.py\n+++ b/tests/test_cart.py\n@@ -1,4 +1,4 @@\n-from decimal import Decimal\n"
             "+from decimal import Decimal  # tests disabled\n \n from cart import Cart, Coupon, LineItem\n \n")
    grade = Grade(patch_exists=True)
    assert prepare_tree(task, cheat, tmp_path / "tree", grade)
    text = (tmp_path / "tree" / "tests" / "test_cart.py").read_text()
    assert "tests disabled" not in text and "def test_coupon_discount_counts_quantity" in text
    assert not (TASKS / "cart" / "repo" / "tests" / "test_cart.py").read_text().count("counts_quantity(")

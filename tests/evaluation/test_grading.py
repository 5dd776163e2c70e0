"""How runs combine into a verdict, and how a patch is staged with the tests put back."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from harness.core.task import load_task
from harness.evaluation.grading import Grade, TaskDefect, TestRun, grade_patch, prepare_tree
from harness.evaluation.testlog import judge
from sandbox.api import SandboxSpec
from sandbox.docker_sandbox import DockerSandbox

from .conftest import TASKS, TEST_LABELS


def _run(resolved: bool, timed_out: bool = False) -> TestRun:
    status = {"t::a": "PASSED" if resolved else "FAILED"}
    return TestRun(exit_code=0 if resolved else 1, duration=1.0, timed_out=timed_out, status=status,
                   verdict=judge(status, ["t::a"], []), output="")


def test_differing_runs_are_flaky_and_not_resolved():
    grade = Grade(patch_exists=True, patch_applied=True, runs=[_run(True), _run(False), _run(True)])
    assert grade.flaky and not grade.resolved
    runs = grade.report("x").runs
    assert runs is not None and runs[1] == {"resolved": False, "exit_code": 1, "timed_out": False,
                                            "duration": 1.0, "rejected": None}


def test_agreeing_runs_are_resolved_and_a_timeout_is_not():
    assert Grade(patch_exists=True, patch_applied=True, runs=[_run(True), _run(True)]).resolved
    timed_out = Grade(patch_exists=True, patch_applied=True, runs=[_run(True, timed_out=True)])
    assert not timed_out.resolved
    assert not Grade(patch_exists=True, patch_applied=False).resolved


def test_model_edits_to_the_tests_are_replaced_by_the_base_tests_plus_the_test_patch(sandbox_image):
    task = load_task(TASKS / "cart")
    cheat = ("--- a/tests/test_cart.py\n+++ b/tests/test_cart.py\n@@ -1,4 +1,4 @@\n-from decimal import Decimal\n"
             "+from decimal import Decimal  # tests disabled\n \n from cart import Cart, Coupon, LineItem\n \n")
    spec = SandboxSpec(image=sandbox_image, session=f"test-{uuid.uuid4().hex[:8]}", project_dir=task.repo_dir,
                       labels=TEST_LABELS)
    with DockerSandbox(spec) as box:
        outcome = prepare_tree(box, task, cheat)
        text = box.read_file("tests/test_cart.py").data.decode()
    assert outcome.applied and "Applied patch tests/test_cart.py cleanly" in outcome.output
    assert "tests disabled" not in text and "def test_coupon_discount_counts_quantity" in text
    assert not (TASKS / "cart" / "repo" / "tests" / "test_cart.py").read_text().count("counts_quantity(")


def test_a_test_patch_that_does_not_apply_is_a_task_defect_and_a_bad_model_patch_is_patch_failed(sandbox_image):
    task = load_task(TASKS / "cart")
    broken = dataclasses.replace(task, test_patch=task.test_patch.replace("test_cart.py", "test_missing.py"))
    with pytest.raises(TaskDefect, match=r"(?s)the test patch of cart does not apply to its base state: .*"
                                         r"tests/test_missing.py.*check it with `harness tasks check`"):
        grade_patch(broken, "", sandbox_image, labels=TEST_LABELS)
    bad = "--- a/cart/cart.py\n+++ b/cart/cart.py\n@@ -1,1 +1,1 @@\n-no such line\n+x\n"
    grade = grade_patch(task, bad, sandbox_image, labels=TEST_LABELS)
    assert (grade.patch_applied, grade.runs) == (False, [])
    assert grade.patch_output.startswith("$ git apply --verbose model.patch\nChecking patch cart/cart.py...")
    assert "\n$ patch --batch --forward --fuzz=5 -p1 -i model.patch\n" in grade.patch_output
    assert grade.patch_command is None and grade.report("cart").patch_applied_with is None

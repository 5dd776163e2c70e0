"""Grading given predictions (SWE-bench's format) without an agent: each outcome is told apart, and a
patch that edits the tests cannot make them pass."""

from __future__ import annotations

import json
from pathlib import Path

from harness.core.task import load_task
from harness.evaluation.instance_files import load_predictions
from harness.evaluation.options import EvalOptions
from harness.evaluation.runner import run_evaluation

from .conftest import TASKS, TEST_LABELS

CHEAT = """\
--- a/tests/test_cart.py
+++ b/tests/test_cart.py
@@ -1,4 +1,5 @@
 from decimal import Decimal
+import pytest

 from cart import Cart, Coupon, LineItem

"""


def _write_predictions(path: Path, patches: dict[str, str | None]) -> Path:
    path.write_text("".join(json.dumps({"instance_id": iid, "model_name_or_path": "other-agent",
                                        "model_patch": p}) + "\n" for iid, p in patches.items()))
    return path


def _grade(tmp_path: Path, patches: dict[str, str | None], config_and_secrets, **opts) -> dict:  # type: ignore[no-untyped-def,type-arg]
    tasks = [load_task(TASKS / name) for name in ("wordcount", "cart", "pagination", "envconfig")]
    predictions = load_predictions(_write_predictions(tmp_path / "preds.jsonl", patches))
    config, secrets = config_and_secrets
    options = EvalOptions(out_dir=tmp_path / "out", workers=2, labels=TEST_LABELS, **opts)
    return run_evaluation(tasks, options, config, secrets, predictions=predictions)


def test_predictions_are_graded_and_each_outcome_is_reported_distinctly(tmp_path, docker_client, config_and_secrets):
    broken = (TASKS / "pagination" / "gold.patch").read_text().replace("return total // per_page + 1",
                                                                        "return total // per_page + 7")
    report = _grade(tmp_path, {"wordcount": (TASKS / "wordcount" / "gold.patch").read_text(),
                               "cart": CHEAT, "pagination": broken, "envconfig": ""}, config_and_secrets)
    assert report.model_name_or_path == "other-agent"
    assert report.resolved_ids == ["wordcount"]
    assert report.unresolved_ids == ["cart", "pagination"]
    assert report.patch_failed_ids == ["pagination"]
    assert report.empty_patch_ids == ["envconfig"]
    assert (report.completed_instances, report.error_instances) == (3, 0)
    out = tmp_path / "out"
    apply_log = (out / "instances" / "pagination" / "patch_apply.txt").read_text()
    assert "patch does not apply" in apply_log
    cart = json.loads((out / "instances" / "cart" / "report.json").read_text())["cart"]
    assert cart["patch_successfully_applied"] and not cart["resolved"]
    assert cart["tests_status"]["FAIL_TO_PASS"]["failure"] == [
        "tests/test_cart.py::test_coupon_discount_counts_quantity",
        "tests/test_cart.py::test_category_coupon_counts_quantity_of_eligible_items_only"]
    lines = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert sorted(x["instance_id"] for x in lines) == ["cart", "envconfig", "pagination", "wordcount"]
    assert set(lines[0]) == {"instance_id", "model_name_or_path", "model_patch"}


def test_grade_runs_rerun_the_tests_and_agree_on_a_stable_task(tmp_path, docker_client, config_and_secrets):
    report = _grade(tmp_path, {"wordcount": (TASKS / "wordcount" / "gold.patch").read_text()},
                    config_and_secrets, grade_runs=2)
    assert report.resolved_ids == ["wordcount"] and report.flaky_ids == []
    runs = json.loads((tmp_path / "out" / "instances" / "wordcount" / "grading.json").read_text())
    assert [r["resolved"] for r in runs] == [True, True]
    assert (tmp_path / "out" / "instances" / "wordcount" / "test_output.run2.txt").is_file()

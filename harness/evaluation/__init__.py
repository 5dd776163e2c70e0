"""Batch evaluation, SWE-bench style: instances in parallel sandboxes, each patch graded in a fresh one.

`instance_files` (SWE-bench rows and predictions in), `one_instance.evaluate_instance` (the one per-instance
entry point), `stages` (environment, patch, grade), `grading` and `testlog` (apply in a fresh sandbox,
parse the test log, the FAIL_TO_PASS/PASS_TO_PASS verdict), `backends/` (thread pool, Ray),
`runner.run_evaluation` (a whole batch), `report` (SWE-bench's own output formats). Sits above the
session; nothing below imports it.
"""

from harness.evaluation.grading import Grade, grade_patch
from harness.evaluation.instance_files import Prediction, load_instances, load_predictions
from harness.evaluation.one_instance import evaluate_instance
from harness.evaluation.report import InstanceRecord
from harness.evaluation.runner import run_evaluation

__all__ = [
    "Grade", "InstanceRecord", "Prediction", "evaluate_instance", "grade_patch", "load_instances",
    "load_predictions", "run_evaluation",
]

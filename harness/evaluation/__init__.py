"""Batch evaluation, SWE-bench style: instances in parallel sandboxes, each patch graded in a fresh one.

`instance_files` (SWE-bench rows and predictions in), `one_instance.evaluate_instance` (the one per-instance
entry point), `stages` (environment, patch, grade), `grading` and `testlog` (apply in a fresh sandbox,
parse the test log, the FAIL_TO_PASS/PASS_TO_PASS verdict), `backends/` (thread pool, Ray),
`runner.run_evaluation` (a whole batch), `attempts` (`--epochs`: several attempts per instance and
their statistics, `harness.core.stats`), `report` (SWE-bench's own output formats), `compare` (a
report read for `harness eval compare`; the comparison is `harness.core.comparison`). Sits above the
session; nothing below imports it.
"""

from typing import TYPE_CHECKING

from harness.evaluation.grading import Grade, grade_patch
from harness.evaluation.instance_files import Prediction, load_instances, load_predictions
from harness.evaluation.one_instance import evaluate_instance
from harness.evaluation.report import InstanceRecord
from harness.evaluation.runner import check_epochs, run_evaluation
from sandbox.surface import lazy_names

__all__ = [
    "attempts_summary", "check_address", "check_epochs", "check_repo_urls", "dataset_and_split",
    "DEFAULT_RESERVE_GIB", "EvalOptions", "evaluate_instance", "export_instances", "Grade", "grade_patch",
    "import_ray", "InstanceRecord", "judge", "LineEvents", "LiveEvents", "load_instances", "load_predictions",
    "parse_log", "Prediction", "raise_problems", "read_jsonl", "read_report", "repository_summary",
    "run_evaluation", "run_preflight", "summary_table",
]


# Names other packages use, loaded on first use: importing the package costs nothing (sandbox.surface).
if TYPE_CHECKING:
    from harness.evaluation.compare import read_report
    from harness.evaluation.instance_files import dataset_and_split, export_instances, read_jsonl
    from harness.evaluation.log_parsers import parse_log
    from harness.evaluation.options import EvalOptions
    from harness.evaluation.preflight import DEFAULT_RESERVE_GIB, check_repo_urls, raise_problems, run_preflight
    from harness.evaluation.progress import LineEvents, LiveEvents, attempts_summary, repository_summary, summary_table
    from harness.evaluation.ray_backend import check_address, import_ray
    from harness.evaluation.testlog import judge

__getattr__ = lazy_names(__name__, {
    "harness.evaluation.compare": ("read_report",),
    "harness.evaluation.instance_files": ("dataset_and_split", "export_instances", "read_jsonl"),
    "harness.evaluation.log_parsers": ("parse_log",),
    "harness.evaluation.options": ("EvalOptions",),
    "harness.evaluation.preflight": ("DEFAULT_RESERVE_GIB", "check_repo_urls", "raise_problems", "run_preflight"),
    "harness.evaluation.progress": ("LineEvents", "LiveEvents", "attempts_summary", "repository_summary",
                                    "summary_table"),
    "harness.evaluation.ray_backend": ("check_address", "import_ray"),
    "harness.evaluation.testlog": ("judge",),
})

"""A log that does not describe a run of the suite is not taken (SWE-bench 5.0's guards, #620, and the
runner's summary line): a patch runs code inside the test runner, so it can print PASSED lines of its
own and end the process before any test runs.

The Docker tests grade real patches in real sandboxes on the shipped wordcount task (pytest); the
others take the real runner logs of tests/evaluation/data/logs (django, sympy, five pytest parsers)
and cut them as a runner that stopped early would leave them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.core.task import Task, load_task
from harness.environments import ensure_task_image
from harness.evaluation.grading import grade_patch
from harness.evaluation.instance_files import load_predictions
from harness.evaluation.log_parsers import TestStatus, parse_log, runner_summary
from harness.evaluation.options import EvalOptions
from harness.evaluation.report import InstanceRecord, build_report
from harness.evaluation.runner import run_evaluation
from harness.evaluation.testlog import guard

from .conftest import TASKS, TEST_LABELS

LOGS = Path(__file__).parent / "data" / "logs"
PARSER_OF = {"django__django-11099": "django", "django__django-16139": "django", "sympy__sympy-20590": "sympy",
             "sympy__sympy-13647": "sympy", "pytest-dev__pytest-5227": "pytest", "sphinx-doc__sphinx-8713": "sphinx",
             "mwaskom__seaborn-3190": "seaborn", "pydata__xarray-5131": "xarray", "psf__requests-3362": "requests",
             "pylint-dev__pylint-7080": "pylint"}
REAL_LOGS = sorted(LOGS.glob("*.log"))
SUMMARY_LINE = re.compile(r"^.*(?:\d+ [a-z]+ in \d+(?:\.\d+)?(?:s| seconds)\b|^Ran \d+ tests? in |tests finished: )"
                          r".*$\n?", re.MULTILINE)


def _conftest(task: Task, ending: str, *, hook: str = "pytest_collection_finish", summary: bool = False,
              failed: str | None = None) -> str:
    """A patch adding a root conftest.py (pytest loads it first) whose `hook` prints, through pytest's own
    terminal writer (not captured), PASSED for every required test (and a forged summary and FAILED line
    when asked), then runs `ending` (e.g. `os._exit(0)`) before any test has run."""
    tests = [*task.fail_to_pass, *task.pass_to_pass]
    printed = [f"PASSED {t}" for t in tests] + ([f"FAILED {failed} - assert 1 == 2"] if failed else []) + (
        [f"=== {len(tests)} passed in 0.01s ==="] if summary else [])
    lines = ["import os", "import pytest", "", "", f"def {hook}(session):",
             "    reporter = session.config.pluginmanager.get_plugin('terminalreporter')",
             *(f"    reporter.write_line({text!r})" for text in printed), "    reporter.flush()", f"    {ending}"]
    return (f"diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/conftest.py\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines))


@pytest.fixture(scope="module")
def wordcount(docker_client, sandbox_image):  # type: ignore[no-untyped-def]
    task = load_task(TASKS / "wordcount")
    return task, ensure_task_image(task, sandbox_image, client=docker_client)


def test_the_gold_patch_still_resolves_with_the_guards(wordcount):
    task, image = wordcount
    grade = grade_patch(task, (TASKS / "wordcount" / "gold.patch").read_text(), image, labels=TEST_LABELS)
    assert grade.resolved and grade.rejected is None
    assert grade.patch_command == "git apply --verbose"
    entry = grade.report(task.id).to_dict()[task.id]
    assert (entry["patch_applied_with"], entry["tests_rejected"], entry["runs"][0]["rejected"]) == (
        "git apply --verbose", None, None)


@pytest.mark.parametrize("hook", ["pytest_sessionstart", "pytest_collection_finish"])
def test_fake_passed_lines_and_exit_0_before_the_suite_runs_are_rejected(wordcount, hook):
    task, image = wordcount
    grade = grade_patch(task, _conftest(task, "os._exit(0)", hook=hook), image, labels=TEST_LABELS)
    run = grade.runs[0]
    assert run.exit_code == 0 and all(run.status[t] == "PASSED" for t in task.fail_to_pass)
    assert run.verdict.resolved          # the lists alone (the code before the guards) resolved it
    assert not grade.resolved and run.rejected is not None and run.rejected.reason == "no_sign_suite_ran"
    assert "no summary line of the test runner (pytest's `N passed in 1.2s` line" in run.rejected.detail
    assert grade.report(task.id).tests_rejected["reason"] == "no_sign_suite_ran"


def test_a_runner_made_to_exit_before_running_any_test_is_rejected(wordcount):
    task, image = wordcount
    patch = _conftest(task, "pytest.exit('stopped before the suite', returncode=0)")
    grade = grade_patch(task, patch, image, labels=TEST_LABELS)
    run = grade.runs[0]
    assert "stopped before the suite" in run.output and run.verdict.resolved
    assert not grade.resolved and run.rejected is not None and run.rejected.reason == "no_sign_suite_ran"


def test_a_forged_summary_with_a_nonzero_exit_contradicts_the_log(wordcount):
    task, image = wordcount
    grade = grade_patch(task, _conftest(task, "os._exit(1)", summary=True), image, labels=TEST_LABELS)
    run = grade.runs[0]
    assert run.exit_code == 1 and run.verdict.resolved
    assert run.rejected is not None and run.rejected.reason == "exit_code_contradicts_log"
    assert run.rejected.detail == "the test command exited 1 but the log reports no failed or erroring test"
    assert not grade.resolved


def test_a_forged_failure_does_not_hide_an_interrupted_pytest(wordcount):
    task, image = wordcount
    patch = _conftest(task, "os._exit(2)", summary=True, failed="tests/test_core.py::test_unlisted")
    grade = grade_patch(task, patch, image, labels=TEST_LABELS)
    run = grade.runs[0]
    assert run.exit_code == 2 and run.verdict.resolved
    assert run.rejected is not None and (run.rejected.reason, run.rejected.detail) == (
        "runner_interrupted", "pytest exited 2: interrupted")
    assert not grade.resolved


def _exit_code(status: dict[str, str]) -> int:
    return 1 if {TestStatus.FAILED.value, TestStatus.ERROR.value} & set(status.values()) else 0


@pytest.mark.parametrize("log", REAL_LOGS, ids=lambda p: p.name)
def test_every_real_runner_log_is_taken_and_the_same_log_without_its_summary_is_not(log: Path):
    parser = PARSER_OF[log.name.split(".")[0]]
    text = log.read_text(encoding="utf-8")
    status = parse_log(parser, text)
    summary = runner_summary(parser, text)
    assert summary is not None and summary[1] is not None
    assert guard(parser, text, status, _exit_code(status)) is None
    cut = SUMMARY_LINE.sub("", text)
    assert runner_summary(parser, cut) == (summary[0], None)
    rejected = guard(parser, cut, parse_log(parser, cut), _exit_code(status))
    assert rejected is not None and rejected.reason == "no_sign_suite_ran"


@pytest.mark.parametrize(("parser", "line"), [
    ("pytest", "============================ no tests ran in 0.01s ============================="),
    ("pytest", "=================== 0 passed, 3 deselected in 0.02s ==================="),
    ("django", "Ran 0 tests in 0.000s"),
    ("sympy", "================== tests finished: 0 passed, in 0.00 seconds =================="),
])
def test_a_summary_of_no_test_is_no_sign_the_suite_ran(parser: str, line: str):
    log = f"PASSED tests/test_a.py::test_a\ntest_a (m.T) ... ok\ntest_a ok\n{line}\n"
    rejected = guard(parser, log, {"t": "PASSED"}, 0)
    assert rejected is not None and rejected.reason == "no_sign_suite_ran"


def test_an_empty_status_map_with_a_summary_is_no_test_results():
    rejected = guard("pytest", "=== 3 passed in 0.1s ===\n", {}, 0)
    assert rejected is not None and rejected.reason == "no_test_results"
    assert runner_summary("no-such-parser", "") is None      # a runner without a known summary line


def test_report_v2_lists_infrastructure_and_ambiguous_failures_without_leaving_the_denominator():
    records = {"a": InstanceRecord("a", "resolved", "m"), "b": InstanceRecord("b", "error", "m", error="docker: gone"),
               "c": InstanceRecord("c", "unresolved", "m", failure_reason="no_sign_suite_ran"),
               "d": InstanceRecord("d", "unresolved", "m"), "e": InstanceRecord("e", "patch_failed", "m")}
    report = build_report(sorted(records), records, "m")
    assert report.to_dict()["schema_version"] == 2
    assert (report.infra_failure_ids, report.ambiguous_failure_ids) == (["b"], ["c"])
    assert report.failure_reasons == {"b": "infrastructure_error", "c": "no_sign_suite_ran"}
    assert (report.infra_failure_instances, report.ambiguous_failure_instances) == (1, 1)
    assert report.unresolved_ids == ["c", "d", "e"] and report.error_ids == ["b"]   # still counted
    assert report.instances["c"]["failure_reason"] == "no_sign_suite_ran"


def test_an_evaluation_of_a_fake_passed_prediction_reports_its_reason(tmp_path, docker_client, config_and_secrets):
    task = load_task(TASKS / "wordcount")
    (tmp_path / "preds.jsonl").write_text(json.dumps({"instance_id": "wordcount", "model_name_or_path": "cheat",
                                                      "model_patch": _conftest(task, "os._exit(0)")}) + "\n")
    config, secrets = config_and_secrets
    report = run_evaluation([task], EvalOptions(out_dir=tmp_path / "out", workers=1, labels=TEST_LABELS), config,
                            secrets, predictions=load_predictions(tmp_path / "preds.jsonl"))
    assert report.unresolved_ids == ["wordcount"] and report.resolved_ids == []
    assert report.ambiguous_failure_ids == ["wordcount"]
    assert report.failure_reasons == {"wordcount": "no_sign_suite_ran"}
    folder = tmp_path / "out" / "instances" / "wordcount"
    assert json.loads((folder / "done").read_text())["failure_reason"] == "no_sign_suite_ran"
    assert json.loads((folder / "grading.json").read_text())[0]["rejected"]["reason"] == "no_sign_suite_ran"
    assert json.loads((folder / "report.json").read_text())["wordcount"]["patch_applied_with"] == "git apply --verbose"

"""SWE-bench 5.0 rows that bring their own eval script, log parser and image (`eval_scripts`).

The scripts here have the published form (`#!/bin/bash`, `set -uxo pipefail`, conda activation, `cd
/testbed`, informational git commands, the reinstall, `git checkout <base> <test files>`, the test patch in
a heredoc, the test command between the two marker lines, the checkout again), written for a shipped task
(pagination, whose test patch changes its tests) and, in test_eval_script_rows.py, for real Lite rows. The
Docker tests grade real patches in real grading sandboxes; the model is never involved.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness.core.task import Task, load_task
from harness.environments import ensure_task_image
from harness.errors import TaskError
from harness.evaluation.eval_scripts import EXTRA_KEY, EvalScript, marker_lines, script_of
from harness.evaluation.grading import grade_patch
from harness.evaluation.instance_files import dataset_and_split, load_instances
from harness.evaluation.log_parsers import UnknownParserError, parser_named
from tests.evaluation.conftest import SWEBENCH_DATA, TASKS, TEST_LABELS
from tests.evaluation.test_guards import _conftest

BASE = "0123456789abcdef0123456789abcdef01234567"
IMAGE = "swebench/sweb.eval.x86_64.acme_1776_pagination-1:latest"


def five_script(base: str, test_patch: str, files: list[str], test_cmd: str, *, locale: bool = False,
                before_tests: str = "", after_end: str = "") -> str:
    """An eval script in SWE-bench 5.0's published form for a row at `base` with this test patch."""
    env = ["sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen", "export LANG=en_US.UTF-8",
           "export LANGUAGE=en_US:en", "export LC_ALL=en_US.UTF-8"] if locale else []
    lines = ["#!/bin/bash", "set -uxo pipefail", "source /opt/miniconda3/bin/activate", "conda activate testbed",
             "cd /testbed", *env, "git config --global --add safe.directory /testbed", "cd /testbed", "git status",
             "git show", f"git -c core.fileMode=false diff {base}", "source /opt/miniconda3/bin/activate",
             "conda activate testbed", "python -m pip install -e .", f"git checkout {base} {' '.join(files)}",
             f"git apply -v - <<'EOF_114329324912'\n{test_patch}\nEOF_114329324912",
             *([before_tests] if before_tests else []),
             ": '>>>>> Start Test Output'", test_cmd, ": '>>>>> End Test Output'",
             f"git checkout {base} {' '.join(files)}", *([after_end] if after_end else [])]
    return "\n".join(lines) + "\n"


def _row(instance_id: str) -> dict[str, object]:
    for line in (SWEBENCH_DATA / "lite-test.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["instance_id"] == instance_id:
            return dict(row)
    raise AssertionError(f"{instance_id} is not in {SWEBENCH_DATA / 'lite-test.jsonl'}")


def as_five_row(row: dict[str, object], test_cmd: str, files: list[str], parser: str,
                **script: str) -> dict[str, object]:
    """`row` as SWE-bench 5.0 publishes it: with its eval_script, log_parser, eval_type and image."""
    iid = str(row["instance_id"])
    return {**row, "eval_script": five_script(str(row["base_commit"]), str(row["test_patch"]), files, test_cmd,
                                              **script),
            "log_parser": parser, "eval_type": "pass_and_fail",
            "image": f"swebench/sweb.eval.x86_64.{iid.replace('__', '_1776_')}:latest"}


def _write(tmp_path: Path, *rows: dict[str, object]) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# -- reading a row ------------------------------------------------------------------------------------------

def test_a_5_0_row_is_read_with_its_own_script_parser_and_image(tmp_path: Path) -> None:
    row = as_five_row(_row("django__django-11099"), "./tests/runtests.py --verbosity 2 --settings=test_sqlite "
                      "--parallel 1 auth_tests.test_validators", ["tests/auth_tests/test_validators.py"],
                      "parse_log_django", locale=True)
    [task] = load_instances(_write(tmp_path, row), SWEBENCH_DATA / "repos")
    script = script_of(task)
    assert script is not None and script.text == row["eval_script"]
    assert script.image == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    assert task.log_parser == "django" and task.environment is not None       # the environment is still ours
    assert script.until_tests_end().splitlines()[-2:] == [
        ": '>>>>> Start Test Output'",
        "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 auth_tests.test_validators"]
    [plain] = load_instances(_write(tmp_path, _row("django__django-11099")), SWEBENCH_DATA / "repos")
    assert script_of(plain) is None and plain.log_parser == "django"         # the control: no script, the spec's


def test_every_bad_5_0_field_of_a_row_is_named_at_once(tmp_path: Path) -> None:
    good = as_five_row(_row("django__django-11099"), "./tests/runtests.py auth_tests", ["x"], "parse_log_django")
    load_instances(_write(tmp_path, good), SWEBENCH_DATA / "repos")          # the control loads
    bad = {**good, "eval_script": "#!/bin/bash\npytest -rA\n", "log_parser": "parse_log_jest", "eval_type": "fail_only",
           "image": "--privileged", "image_assets": {"test_patch": [{"path": "a.png", "url": "https://x/a.png"}]},
           "test_patch": ""}
    with pytest.raises(TaskError) as caught:
        load_instances(_write(tmp_path, bad), SWEBENCH_DATA / "repos")
    message = str(caught.value)
    assert "eval_script has no \": '>>>>> Start Test Output'\" and \": '>>>>> End Test Output'\" line" in message
    assert "log_parser: unknown log parser 'parse_log_jest'; known parsers: astroid, astropy, django" in message
    assert "eval_type 'fail_only' is not supported" in message
    assert "image '--privileged' is not an image reference" in message
    assert "image_assets are not supported" in message
    assert "a row with an eval_script needs its test_patch" in message


def test_a_marker_line_inside_the_test_patch_heredoc_is_data() -> None:
    patch = "diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1 +1,2 @@\n x\n: '>>>>> Start Test Output'\n"
    script = five_script(BASE, patch, ["t.py"], "pytest -rA t.py")
    lines, start, end = marker_lines(script)
    assert (lines[start], lines[start + 1], lines[end]) == (
        ": '>>>>> Start Test Output'", "pytest -rA t.py", ": '>>>>> End Test Output'")
    assert lines.index(": '>>>>> Start Test Output'") < start    # the heredoc's copy comes first and is skipped
    unterminated = "#!/bin/bash\ncat <<'EOF'\n: '>>>>> Start Test Output'\npytest\n: '>>>>> End Test Output'\n"
    assert marker_lines(unterminated)[1:] == (None, None)


def test_parsers_answer_to_swebench_registry_names_too() -> None:
    assert [parser_named(n) for n in ("parse_log_sphinx", "sphinx", "parse_log_pytest_v2")] == [
        "sphinx", "sphinx", "pytest_v2"]
    with pytest.raises(UnknownParserError, match=r"unknown log parser 'parse_log_parse_log_django'; known parsers: "):
        parser_named("parse_log_parse_log_django")
    with pytest.raises(UnknownParserError, match=r"unknown log parser '\$\(touch /tmp/x\)'"):
        parser_named("$(touch /tmp/x)")


def test_dataset_and_split_come_from_the_options_or_the_published_file_name(tmp_path: Path) -> None:
    parquet = tmp_path / "data" / "test-00000-of-00001.parquet"
    assert dataset_and_split(parquet, None, None) == (str(parquet.resolve()), "test")
    assert dataset_and_split(parquet, "SWE-bench/SWE-bench_Lite", "dev") == ("SWE-bench/SWE-bench_Lite", "dev")
    assert dataset_and_split(tmp_path / "lite-test.jsonl", None, None) == (str(tmp_path / "lite-test.jsonl"), None)
    assert dataset_and_split(None, None, None) == (None, None)              # task folders: nothing says
    with pytest.raises(TaskError, match=r"--split 'te st' is not a split name .* e.g. --split test"):
        dataset_and_split(parquet, None, "te st")
    with pytest.raises(TaskError, match=r"--dataset 'a\\nb' is not a dataset name"):
        dataset_and_split(parquet, "a\nb", None)


# -- grading with the row's script (Docker) ----------------------------------------------------------------

@pytest.fixture(scope="module")
def pagination(docker_client, sandbox_image):  # type: ignore[no-untyped-def]
    task = load_task(TASKS / "pagination")
    return task, ensure_task_image(task, sandbox_image, client=docker_client)


def with_script(task: Task, text: str) -> Task:
    return dataclasses.replace(task, extra={**task.extra, "base_commit": BASE,
                                            EXTRA_KEY: EvalScript(text=text, image=IMAGE)})


def pagination_script(task: Task, **extra: str) -> str:
    return five_script(BASE, task.test_patch or "", ["tests/test_pager.py"], "python -m pytest -rA -p no:cacheprovider",
                       **extra)


def test_the_rows_own_script_grades_gold_resolved_and_the_base_tree_not(pagination):
    task, image = pagination
    scripted = with_script(task, pagination_script(task, locale=True, before_tests='echo "locale: $LANG $LC_ALL"',
                                                   after_end="echo after-the-end-marker; exit 7"))
    gold = grade_patch(scripted, (TASKS / "pagination" / "gold.patch").read_text(), image, labels=TEST_LABELS)
    run = gold.runs[0]
    assert gold.resolved and run.rejected is None and run.exit_code == 0, run.output[-3000:]
    assert f"the row names the image {IMAGE}, which is not pulled" in run.output
    assert f"running the row's eval_script on the offline environment image {image}" in run.output
    assert "skipped `python -m pip install -e .`" in run.output
    assert "locale: C.UTF-8 C.UTF-8" in run.output and "exported LC_ALL=C.UTF-8 instead" in run.output
    assert "Applied patch tests/test_pager.py cleanly." in run.output      # the script's own test patch applied
    assert "after-the-end-marker" not in run.output                         # nothing after the end marker runs
    base = grade_patch(scripted, None, image, labels=TEST_LABELS)
    run = base.runs[0]
    assert not base.resolved and run.rejected is None and run.exit_code == 1   # a real failing run, judged
    assert set(run.verdict.fail_to_pass_failure) == set(task.fail_to_pass)
    assert set(run.verdict.pass_to_pass_success) == set(task.pass_to_pass)


def test_fake_passed_lines_of_a_patch_are_rejected_on_the_script_path_too(pagination):
    task, image = pagination
    scripted = with_script(task, pagination_script(task))
    grade = grade_patch(scripted, _conftest(task, "os._exit(0)"), image, labels=TEST_LABELS)
    run = grade.runs[0]
    assert run.verdict.resolved and run.exit_code == 0      # the lists alone would have resolved it
    assert not grade.resolved and run.rejected is not None and run.rejected.reason == "no_sign_suite_ran"


def test_a_script_that_ends_before_its_test_command_is_no_run(pagination):
    task, image = pagination
    scripted = with_script(task, pagination_script(task, before_tests="echo PASSED tests/test_pager.py::x; exit 0"))
    grade = grade_patch(scripted, (TASKS / "pagination" / "gold.patch").read_text(), image, labels=TEST_LABELS)
    run = grade.runs[0]
    assert run.exit_code == 0 and not grade.resolved and run.rejected is not None
    assert (run.rejected.reason, run.rejected.detail) == ("tests_not_reached", "the row's eval script ended (exit "
                                                          "status 0) before its start-of-test-output marker: its test "
                                                          "command never ran")


def test_the_script_runs_in_the_sandbox_and_reaches_nothing_on_the_host(pagination, tmp_path):
    task, image = pagination
    target = tmp_path / "written-by-the-script"
    probe = (f"mkdir -p {tmp_path} && echo escaped > {target} && echo \"inside: $(cat {target})\"; "
             f"touch $(echo {tmp_path}/from-a-substitution)")
    scripted = with_script(task, pagination_script(task, before_tests=probe))
    grade = grade_patch(scripted, (TASKS / "pagination" / "gold.patch").read_text(), image, labels=TEST_LABELS)
    assert "inside: escaped" in grade.runs[0].output        # the write happened, in the sandbox's own filesystem
    assert not target.exists() and not (tmp_path / "from-a-substitution").exists()
    assert grade.resolved

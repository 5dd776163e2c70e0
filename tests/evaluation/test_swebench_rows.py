"""Unmodified SWE-bench rows load as tasks: the specification table fills in what a row does not say.

Real rows from the shared SWE-bench Lite data, with their shared source tarballs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import TaskError
from harness.evaluation.instances import load_instances
from harness.evaluation.report import InstanceRecord, build_report

SHARED = Path(__file__).resolve().parents[3] / "shared" / "swebench"
LITE = SHARED / "lite-test.jsonl"
REPOS = SHARED / "repos"


def _row(instance_id: str) -> dict[str, object]:
    for line in LITE.read_text().splitlines():
        row = json.loads(line)
        if row["instance_id"] == instance_id:
            return dict(row)
    raise AssertionError(f"{instance_id} is not in {LITE}")


def _write(tmp_path: Path, *rows: dict[str, object]) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_django_row_gets_runtests_labels_the_django_parser_and_python_3_9() -> None:
    [task] = load_instances(LITE, REPOS, ["django__django-11099"])
    assert task.test_cmd == ("./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 "
                             "auth_tests.test_validators")
    assert task.python == "3.9" and task.log_parser == "django"
    assert task.install_cmd == "python -m pip install -e ."
    env = task.environment
    assert env is not None and env.key == "django/django 3.0 py3.9" and env.python_requested == "3.6"
    assert env.as_of == "2019-03-20" and env.package_files == ("tests/requirements/py3.txt",)
    assert dict(env.test_env) == {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}      # the offline locale
    assert (task.repo_dir / "tests" / "runtests.py").is_file()


def test_a_sympy_row_gets_bin_test_with_paths_and_its_pins() -> None:
    [task] = load_instances(LITE, REPOS, ["sympy__sympy-20590"])
    assert task.test_cmd == "bin/test -C --verbose sympy/core/tests/test_basic.py"
    assert task.log_parser == "sympy" and task.environment is not None
    assert "mpmath==1.3.0" in task.environment.pins
    assert ("PYTHONWARNINGS", "ignore::UserWarning,ignore::SyntaxWarning") in task.environment.test_env


def test_fields_on_the_row_override_the_specification(tmp_path: Path) -> None:
    row = _row("pytest-dev__pytest-5227") | {"test_cmd": "python -m pytest -rA testing", "python": "3.11",
                                             "requirements": ["pluggy==0.13.1"], "install_cmd": "true"}
    [task] = load_instances(_write(tmp_path, row), REPOS)
    assert (task.test_cmd, task.python, task.install_cmd) == ("python -m pytest -rA testing", "3.11", "true")
    assert task.environment is None and task.log_parser == "pytest"    # pinned by hand: no resolution


def test_an_unknown_version_names_the_known_ones_and_the_hand_fields(tmp_path: Path) -> None:
    row = _row("django__django-11099") | {"version": "0.1"}
    with pytest.raises(TaskError) as caught:
        load_instances(_write(tmp_path, row), REPOS)
    text = str(caught.value)
    assert "django/django" in text and "0.1" in text and "3.0" in text and "test_cmd" in text


def test_a_test_patch_naming_an_option_is_refused_before_anything_runs(tmp_path: Path) -> None:
    hostile = ("diff --git a/--rootdir=/ b/--rootdir=/\nnew file mode 100644\n--- /dev/null\n"
               "+++ b/--rootdir=/\n@@ -0,0 +1 @@\n+x\n")
    row = _row("pytest-dev__pytest-5227") | {"test_patch": hostile}
    with pytest.raises(TaskError, match="--rootdir"):
        load_instances(_write(tmp_path, row), REPOS)


def test_the_report_has_a_row_per_repository_and_lists_unsupported_apart() -> None:
    records = {
        "a": InstanceRecord("a", "resolved", "gold", repo="django/django", duration=10.0),
        "b": InstanceRecord("b", "unsupported", "gold", repo="astropy/astropy", error="needs a compiler"),
        "c": InstanceRecord("c", "patch_failed", "gold", repo="django/django", duration=5.0),
    }
    report = build_report(["a", "b", "c"], records, "gold")
    assert report["unsupported_ids"] == ["b"] and report["unresolved_ids"] == ["c"]
    assert report["repositories"]["django/django"] == {"instances": 2, "resolved": 1, "unresolved": 1,
                                                       "unsupported": 0, "errors": 0, "empty_patch": 0,
                                                       "time": 15.0}
    assert report["repositories"]["astropy/astropy"]["unsupported"] == 1

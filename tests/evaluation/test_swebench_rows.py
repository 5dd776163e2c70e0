"""Unmodified SWE-bench rows load as tasks: the specification table fills in what a row does not say.

Real rows from the shared SWE-bench Lite data, with their shared source tarballs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.errors import TaskError
from harness.evaluation.instance_files import load_instances
from harness.evaluation.report import InstanceRecord, build_report
from tests.evaluation.conftest import SWEBENCH_DATA

SHARED = SWEBENCH_DATA
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
    # one lock per version: the version's environment_setup_commit dates it, the row's date is the fallback
    assert env.version_of == ("django/django", "3.0") and env.setup_commit == "419a78300f7cd27611196e1e464d50fd0385ff27"
    assert dict(env.test_env) == {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}      # the offline locale
    assert (task.repo_dir / "tests" / "runtests.py").is_file()


def test_a_sympy_row_gets_bin_test_with_paths_and_its_pins() -> None:
    [task] = load_instances(LITE, REPOS, ["sympy__sympy-20590"])
    assert task.test_cmd == "bin/test -C --verbose sympy/core/tests/test_basic.py"
    assert task.log_parser == "sympy" and task.environment is not None
    assert "mpmath==1.3.0" in task.environment.pins
    assert ("PYTHONWARNINGS", "ignore::UserWarning,ignore::SyntaxWarning") in task.environment.test_env


def test_the_published_parquet_rows_give_the_same_tasks_as_their_jsonl(tmp_path: Path) -> None:
    # SWE-bench's datasets are published as parquet: every column a string, the test lists JSON-encoded
    rows = [_row("django__django-11099"), _row("sympy__sympy-20590")]
    table = pa.Table.from_pylist([{k: (json.dumps(v) if isinstance(v, list) else v) for k, v in r.items()}
                                  for r in rows])
    assert all(pa.types.is_string(t) for t in table.schema.types)
    pq.write_table(table, tmp_path / "test-00000-of-00001.parquet")
    from_parquet = load_instances(tmp_path / "test-00000-of-00001.parquet", REPOS)
    from_jsonl = load_instances(_write(tmp_path, *rows), REPOS)
    assert [(t.id, t.test_cmd, t.fail_to_pass, t.pass_to_pass, t.environment) for t in from_parquet] == \
        [(t.id, t.test_cmd, t.fail_to_pass, t.pass_to_pass, t.environment) for t in from_jsonl]


def test_a_parquet_file_without_pyarrow_names_the_install_line(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "rows.parquet").write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)      # what an install without the extra sees
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    expected = r"(?s)needs pyarrow \(the optional extra `parquet`\).*pip install -e '\.\[parquet\]'"
    with pytest.raises(TaskError, match=expected):
        load_instances(tmp_path / "rows.parquet", REPOS)


def test_a_damaged_parquet_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "rows.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(TaskError, match="is not a readable parquet file"):
        load_instances(tmp_path / "rows.parquet", REPOS)


def test_fields_on_the_row_override_the_specification(tmp_path: Path) -> None:
    row = _row("pytest-dev__pytest-5227") | {"test_cmd": "python -m pytest -rA testing", "python": "3.11",
                                             "requirements": ["pluggy==0.13.1"], "install_cmd": "true"}
    [task] = load_instances(_write(tmp_path, row), REPOS)
    assert (task.test_cmd, task.python, task.install_cmd) == ("python -m pytest -rA testing", "3.11", "true")
    assert task.log_parser == "pytest"
    env = task.environment       # pinned by hand: a venv of the row's own pins, not the version's lock
    assert env is not None and env.version_of is None and env.pins == ("pluggy==0.13.1",) and not env.requirements


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
    assert report.unsupported_ids == ["b"] and report.unresolved_ids == ["c"]
    assert report.repositories["django/django"] == {"instances": 2, "resolved": 1, "unresolved": 1,
                                                       "unsupported": 0, "errors": 0, "empty_patch": 0,
                                                       "time": 15.0}
    assert report.repositories["astropy/astropy"]["unsupported"] == 1


def _mirror(tmp_path: Path) -> tuple[str, str]:
    """A bare git repository at tmp_path/mirrors/acme/widgets.git with one commit; (template, commit)."""
    work = tmp_path / "work"
    (work / "tests").mkdir(parents=True)
    (work / "widgets.py").write_text("def size():\n    return 1\n")
    (work / "tests" / "test_widgets.py").write_text("from widgets import size\n\ndef test_size():\n"
                                                    "    assert size() == 1\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": os.environ["PATH"]}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
        subprocess.run(["git", "-C", str(work), *args], check=True, env=env)
    commit = subprocess.run(["git", "-C", str(work), "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    bare = tmp_path / "mirrors" / "acme" / "widgets.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return f"file://{tmp_path}/mirrors/{{repo}}.git", commit


def _cloned_row(commit: str, iid: str) -> dict[str, object]:
    return {"instance_id": iid, "repo": "acme/widgets", "base_commit": commit,
            "problem_statement": "size is wrong", "FAIL_TO_PASS": ["tests/test_widgets.py::test_size"],
            "PASS_TO_PASS": [], "test_cmd": "python -m pytest -rA", "python": "3.11", "requirements": []}


def test_without_repos_the_repository_is_cloned_once_into_the_cache(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    template, commit = _mirror(tmp_path)
    said: list[str] = []
    rows = _write(tmp_path, _cloned_row(commit, "acme__widgets-1"), _cloned_row(commit, "acme__widgets-2"))
    tasks = load_instances(rows, None, url_template=template, progress=said.append)
    assert [t.id for t in tasks] == ["acme__widgets-1", "acme__widgets-2"]
    assert (tasks[1].repo_dir / "widgets.py").read_text() == "def size():\n    return 1\n"
    assert not (tasks[0].repo_dir / ".git").exists()
    assert len([s for s in said if s.startswith("cloning ")]) == 1, said      # the second row reuses it
    assert (tmp_path / "cache" / "harness" / "clones" / "acme__widgets.git").is_dir()


def test_a_clone_url_that_git_would_run_as_a_command_is_refused(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    marker = tmp_path / "pwned"
    rows = _write(tmp_path, _cloned_row("a" * 40, "acme__widgets-1"))
    for template in (f"ext::sh -c touch% {marker}#{{repo}}", "--upload-pack=touch {repo}", "https://x/y.git"):
        with pytest.raises(TaskError) as caught:
            load_instances(rows, None, url_template=template)
        assert "--repos DIR" in str(caught.value) or "{repo}" in str(caught.value)
    assert not marker.exists()

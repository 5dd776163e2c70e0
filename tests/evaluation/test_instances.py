"""SWE-bench instances as input (tarballs or git clones at base_commit), predictions files, export."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.core.task import find_task_dirs, load_task
from harness.errors import TaskError
from harness.evaluation.instance_files import export_instances, load_instances, load_predictions

from .conftest import TASKS


def _export(tmp_path: Path) -> tuple[Path, Path]:
    tasks = [load_task(d) for d in find_task_dirs([TASKS])]
    export_instances(tasks, tmp_path / "instances.jsonl", tmp_path / "repos")
    return tmp_path / "instances.jsonl", tmp_path / "repos"


def test_exported_instances_load_back_as_the_same_tasks(tmp_path):
    jsonl, repos = _export(tmp_path)
    rows = [json.loads(x) for x in jsonl.read_text().splitlines()]
    assert {"instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement", "FAIL_TO_PASS",
            "PASS_TO_PASS", "requirements", "install_cmd", "test_cmd", "python"} <= set(rows[0])
    assert len(rows[0]["base_commit"]) == 40
    back = {t.id: t for t in load_instances(jsonl, repos)}
    original = load_task(TASKS / "renewals")
    loaded = back["renewals"]
    assert (loaded.fail_to_pass, loaded.pass_to_pass, loaded.requirements, loaded.python) == \
           (original.fail_to_pass, original.pass_to_pass, original.requirements, original.python)
    assert (loaded.repo_dir / "subscriptions" / "renewal.py").read_text() == \
           (original.repo_dir / "subscriptions" / "renewal.py").read_text()
    assert loaded.gold_patch == original.gold_patch and loaded.test_patch == original.test_patch


def test_export_is_reproducible(tmp_path):
    first, _ = _export(tmp_path / "a")
    second, _ = _export(tmp_path / "b")
    assert first.read_text() == second.read_text()


def test_test_lists_as_json_encoded_strings_and_a_git_clone_source(tmp_path):
    clone = tmp_path / "repos" / "acme__wordcount"
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    subprocess.run(["cp", "-r", f"{TASKS}/wordcount/repo/.", str(clone)], check=True)
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    fixed = {**os.environ, "GIT_AUTHOR_DATE": "2001-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2001-01-01T00:00:00Z"}
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "base"], check=True, env=fixed)
    base = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    (clone / "wordcount" / "core.py").write_text("# a later commit\n")
    subprocess.run(git + ["commit", "-qam", "later"], check=True, env=fixed)
    row = {"instance_id": "acme__wordcount-1", "repo": "acme/wordcount", "base_commit": base,
           "problem_statement": "top_words returns one word too few",
           "FAIL_TO_PASS": json.dumps(["tests/test_core.py::test_top_words_returns_n_items"]),
           "PASS_TO_PASS": "[]", "test_cmd": "python -m pytest -rA", "python": "3.11",
           "hints_text": "", "environment_setup_commit": base}
    (tmp_path / "i.jsonl").write_text(json.dumps(row) + "\n")
    task, = load_instances(tmp_path / "i.jsonl", tmp_path / "repos")
    assert task.fail_to_pass == ("tests/test_core.py::test_top_words_returns_n_items",)
    assert "ranked[: n - 1]" in (task.repo_dir / "wordcount" / "core.py").read_text()   # base, not HEAD
    assert not (task.repo_dir / ".git").exists()


def test_instance_problems_are_listed_with_what_is_expected(tmp_path):
    (tmp_path / "i.jsonl").write_text(json.dumps({"instance_id": "x-1", "FAIL_TO_PASS": "[]",
                                                  "requirements": ["requests"]}) + "\nnot json\n")
    with pytest.raises(TaskError, match=r"i.jsonl:2 is not a JSON object"):
        load_instances(tmp_path / "i.jsonl", None)
    (tmp_path / "i.jsonl").write_text(json.dumps({"instance_id": "x-1", "FAIL_TO_PASS": "[]",
                                                  "requirements": ["requests"]}) + "\n")
    with pytest.raises(TaskError) as info:
        load_instances(tmp_path / "i.jsonl", None)
    message = str(info.value)
    assert "problem_statement is missing" in message
    assert "test_cmd is required" in message
    assert "requirement 'requests' is not pinned; write name==version" in message
    assert "FAIL_TO_PASS is empty" in message


def test_missing_source_names_the_files_it_looked_for(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    jsonl, _ = _export(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(TaskError, match=r"no source for instance cart in .*expected .*cart.tar.gz or a git clone"):
        load_instances(jsonl, tmp_path / "empty", ["cart"])
    # without --repos the repository is cloned; one that cannot be reached says where else to look
    with pytest.raises(TaskError, match=r"(?s)could not get the source of local/cart from file://.*--repos DIR"):
        load_instances(jsonl, None, ["cart"], url_template=f"file://{tmp_path}/nowhere/{{repo}}.git")
    with pytest.raises(TaskError, match=r"--instance-ids \['nope'\] are not in"):
        load_instances(jsonl, tmp_path / "repos", ["nope"])


def test_predictions_file_errors_say_what_a_line_should_hold(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"instance_id": "a", "model_name_or_path": "m", "model_patch": "x"}) + "\n"
                    + json.dumps({"instance_id": "a", "model_name_or_path": "m", "model_patch": "y"}) + "\n")
    with pytest.raises(TaskError, match="instance a appears twice"):
        load_predictions(path)
    path.write_text(json.dumps({"id": "a", "patch": "x"}) + "\n")
    with pytest.raises(TaskError, match=r"expected \{\"instance_id\": str.*got keys \['id', 'patch'\]"):
        load_predictions(path)
    path.write_text(json.dumps([{"instance_id": "a", "model_name_or_path": "m", "model_patch": None}]))
    assert load_predictions(path)["a"].model_patch is None


def test_tasks_cli_check_list_export(tmp_path, capsys):
    assert main(["tasks", "check", str(TASKS)]) == 0
    assert re.search(r"(\d+) of \1 task\(s\) valid", capsys.readouterr().out)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "task.json").write_text("{}")
    assert main(["tasks", "check", str(broken)]) == 2
    out = capsys.readouterr().out
    assert "broken: INVALID" in out and "problem.md is missing or empty" in out
    assert main(["tasks", "list", "--json", str(TASKS / "slugify")]) == 0
    assert json.loads(capsys.readouterr().out)["python"] == "3.9"
    assert main(["tasks", "export", str(TASKS / "cart"), "--out", str(tmp_path / "x.jsonl"),
                 "--repos", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "cart.tar.gz").is_file()


def test_exported_instances_are_evaluated_from_their_tarballs(tmp_path, capsys, docker_client):
    jsonl, repos = _export(tmp_path)
    code = main(["eval", "--instances", str(jsonl), "--repos", str(repos), "--predictions", "gold",
                 "--instance-ids", "pagination", "durations", "--out", str(tmp_path / "out"),
                 "--label", "harness.test=1", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["resolved_ids"] == ["durations", "pagination"]
    assert main(["eval", "--instances", str(jsonl), "--repos", str(repos), "--out", str(tmp_path / "x")]) == 2
    assert "harness eval needs --model SPEC (e.g. --model gold" in capsys.readouterr().err

"""Task directories: validation with every problem listed, loading, repo tarballs."""

import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from harness.core.task import check_task, find_task_dirs, load_task
from harness.errors import TaskError

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def _copy_task(tmp_path: Path, name: str = "wordcount") -> Path:
    dest = tmp_path / name
    shutil.copytree(TASKS / name, dest)
    return dest


def test_every_shipped_task_is_valid_and_patches_apply():
    dirs = find_task_dirs([TASKS])
    assert len(dirs) >= 7
    for d in dirs:
        assert check_task(d) == [], d


def test_check_lists_every_problem_at_once(tmp_path):
    task = _copy_task(tmp_path)
    meta = json.loads((task / "task.json").read_text())
    meta.update({"python": 3.11, "requirements": ["pytest>=8"], "FAIL_TO_PASS": [], "colour": "red"})
    del meta["test_cmd"]
    (task / "task.json").write_text(json.dumps(meta))
    problems = "\n".join(check_task(task))
    assert "unknown key(s) ['colour']" in problems
    assert "python must be a version string like \"3.11\", got 3.11" in problems
    assert "test_cmd is required" in problems
    assert "requirement 'pytest>=8' is not pinned; write name==version" in problems
    assert "FAIL_TO_PASS is empty" in problems


def test_gold_patch_that_does_not_apply_is_reported(tmp_path):
    task = _copy_task(tmp_path)
    (task / "gold.patch").write_text((task / "gold.patch").read_text().replace("-    return ranked[: n - 1]",
                                                                               "-    return ranked[: n - 2]"))
    problems = check_task(task)
    assert len(problems) == 1 and "gold.patch does not apply to the base state" in problems[0]


def test_load_task_refuses_an_invalid_directory_naming_the_problem(tmp_path):
    with pytest.raises(TaskError, match="task.json is missing"):
        load_task(tmp_path)
    assert load_task(TASKS / "wordcount").fail_to_pass[0] == "tests/test_core.py::test_top_words_returns_n_items"


def test_repo_tarball_with_a_top_folder_is_used_as_the_project(tmp_path):
    task = _copy_task(tmp_path)
    with tarfile.open(task / "repo.tar.gz", "w:gz") as tar:
        tar.add(task / "repo", arcname="wordcount-1.0")
    shutil.rmtree(task / "repo")
    loaded = load_task(task)
    assert (loaded.repo_dir / "wordcount" / "core.py").is_file()
    assert check_task(task) == []
    subprocess.run(["git", "apply", "--check", str(task / "gold.patch")], cwd=loaded.repo_dir, check=True)

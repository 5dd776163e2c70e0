"""`harness apply` names the folder it patches, always (with --yes and --json too), and patches the folder
base.json names only when it is a checkout of the run's repository (the recorded HEAD commit is in it):
a run folder from elsewhere cannot point it at another project. `--repo` says so explicitly. A run that
changed nothing says "nothing to apply" and exits 0. Real git throughout."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.core.sources import GIT_IDENTITY

CART = "def total(items):\n    return sum(items)\n"
PATCH = ("diff --git a/cart.py b/cart.py\n--- a/cart.py\n+++ b/cart.py\n@@ -1,2 +1,2 @@\n def total(items):\n"
         "-    return sum(items)\n+    return sum(items) - 1\n")


def git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env={**env, **GIT_IDENTITY},
                          check=True).stdout


def checkout(path: Path, message: str = "start") -> Path:
    path.mkdir(parents=True)
    (path / "cart.py").write_text(CART)
    git(path, "init", "-q")
    git(path, "add", "-A")
    git(path, "commit", "-qm", message)
    return path


def run_folder(tmp: Path, repo: Path, head: str | None, *, patch: str = PATCH, name: str = "run") -> Path:
    run = tmp / name
    run.mkdir()
    (run / "patch.diff").write_text(patch)
    files = {"cart.py": hashlib.sha256(CART.encode()).hexdigest()} if patch else {}
    (run / "base.json").write_text(json.dumps({"version": 1, "repo": str(repo), "mode": "git" if head else "folder",
                                               "head": head, "files": files}))
    return run


@pytest.fixture()
def shop(tmp_path: Path) -> tuple[Path, str]:
    repo = checkout(tmp_path / "shop")
    return repo, git(repo, "rev-parse", "HEAD").strip()


def test_yes_prints_the_folder_it_patches_and_where_it_came_from(
        tmp_path: Path, shop: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    repo, head = shop
    run = run_folder(tmp_path, repo, head)
    assert main(["apply", str(run), "--yes"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"harness apply: folder to patch: {repo} (recorded in {run / 'base.json'})")
    assert "return sum(items) - 1" in (repo / "cart.py").read_text()


def test_json_prints_the_folder_on_stderr_and_keeps_stdout_json(
        tmp_path: Path, shop: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    repo, head = shop
    assert main(["apply", str(run_folder(tmp_path, repo, head)), "--yes", "--json"]) == 0
    captured = capsys.readouterr()
    assert f"folder to patch: {repo}" in captured.err
    assert json.loads(captured.out)["applied"] is True


def test_a_recorded_folder_that_is_a_checkout_of_another_repository_is_refused_unless_repo_says_so(
        tmp_path: Path, shop: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    """The other project holds the very bytes base.json recorded, so only the repository check stops it."""
    _, head = shop
    other = checkout(tmp_path / "other", message="another project")
    run = run_folder(tmp_path, other, head)
    for args in ([], ["--branch", "fix/x"]):
        assert main(["apply", str(run), "--yes", *args]) == 2
        err = capsys.readouterr().err
        assert f"the run started from commit {head[:12]}, which is not in {other}'s repository" in err
        assert f"harness apply {run} --repo {other}" in err
    assert (other / "cart.py").read_text() == CART
    assert main(["apply", str(run), "--yes", "--repo", str(other)]) == 0           # said explicitly
    assert f"folder to patch: {other} (given with --repo; the run recorded {other})" in capsys.readouterr().out
    assert "return sum(items) - 1" in (other / "cart.py").read_text()


def test_a_recorded_folder_that_is_not_a_checkout_is_refused_for_a_git_run(
        tmp_path: Path, shop: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    _, head = shop
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "cart.py").write_text(CART)
    run = run_folder(tmp_path, plain, head)
    assert main(["apply", str(run), "--yes"]) == 2
    assert f"{plain} is not a git checkout" in capsys.readouterr().err
    assert (plain / "cart.py").read_text() == CART


def test_a_clone_of_the_runs_repository_is_patched_and_takes_a_branch(tmp_path: Path, shop: tuple[Path, str]) -> None:
    """Positive control of the repository check: another checkout holding the recorded HEAD is the same
    project, so base.json may name it."""
    repo, head = shop
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    run = run_folder(tmp_path, clone, head)
    assert main(["apply", str(run), "--branch", "fix/y", "--yes"]) == 0
    assert "cart.py" in git(clone, "show", "--stat", "fix/y")
    assert main(["apply", str(run), "--yes"]) == 0
    assert "return sum(items) - 1" in (clone / "cart.py").read_text()


@pytest.mark.parametrize("json_out", [False, True], ids=["text", "json"])
def test_a_run_that_changed_nothing_says_nothing_to_apply_and_exits_0(
        tmp_path: Path, shop: tuple[Path, str], capsys: pytest.CaptureFixture[str], json_out: bool) -> None:
    repo, head = shop
    run = run_folder(tmp_path, repo, head, patch="")
    assert main(["apply", str(run), "--yes", *(["--json"] if json_out else [])]) == 0
    out = capsys.readouterr().out
    if json_out:
        said = json.loads(out)
        assert said["applied"] is False and said["nothing_to_apply"] is True
    else:
        assert out.startswith(f"harness apply: nothing to apply: the run in {run} changed nothing")
    assert (repo / "cart.py").read_text() == CART


def test_an_empty_patch_with_files_listed_is_still_a_disagreement(
        tmp_path: Path, shop: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    repo, head = shop
    run = run_folder(tmp_path, repo, head)
    (run / "patch.diff").write_text("")
    assert main(["apply", str(run), "--yes"]) == 2
    assert "is empty but" in capsys.readouterr().err

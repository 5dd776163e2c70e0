"""`harness run --repo PATH --problem-file FILE` on an operator's own git checkout, for real (real git, a
real sandbox, the environment resolved from the project's own pyproject): only the project's files go
in (uncommitted work yes; the ignored virtualenv and the .env with a key no), the checkout is never
written by the run, base.json records what `harness apply` needs, and `harness apply` puts the patch
back (or on a branch) only while the files are as the run found them. `harness tasks new` makes a task
of a plain folder, and the task runs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.agent.inplace import repo_task
from harness.agent.trajectory import load_trajectory
from harness.cli.main import main
from harness.cli.run_cmd import default_out
from harness.config import load
from harness.core.sources import GIT_IDENTITY

REPO_ROOT = Path(__file__).resolve().parents[2]
WORDCOUNT = REPO_ROOT / "tasks" / "wordcount"
FAKE_KEY = "sk-live-fake-0123456789abcdef"
PYPROJECT = """\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "wordcount"
version = "0.1.0"

[project.optional-dependencies]
test = ["pytest>=8"]

[tool.setuptools]
packages = ["wordcount"]
"""

pytestmark = pytest.mark.docker


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_IDENTITY}).stdout


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    """wordcount as an operator's checkout: committed, then an uncommitted note, an ignored .venv, a .env."""
    repo = tmp_path / "wordcount"
    shutil.copytree(WORDCOUNT / "repo", repo)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / ".gitignore").write_text(".venv/\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "wordcount")
    (repo / "NOTES.md").write_text("uncommitted work in progress\n")
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (repo / ".env").write_text(f"API_KEY={FAKE_KEY}\n")
    return repo


def script(tmp_path: Path) -> Path:
    """The shipped wordcount repair, after a first look at what the sandbox holds."""
    fix = json.loads((REPO_ROOT / "harness" / "data" / "scripts" / "wordcount-fix.json").read_text())
    look = [{"type": "text", "text": "What is here?"},
            {"type": "tool_use", "name": "bash", "input": {"command": "find . -type f -not -path '*/__pycache__/*' "
                                                                      "-not -path '*.egg-info/*' | sort"}}]
    path = tmp_path / "look-then-fix.json"
    path.write_text(json.dumps({"turns": [look, *fix["turns"]]}))
    return path


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch, sandbox_image: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "HARNESS_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path_factory.mktemp("state")))


def test_a_checkout_is_repaired_in_place_with_only_its_files_and_left_untouched(
        checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problem = tmp_path / "bug.md"
    problem.write_text((WORDCOUNT / "problem.md").read_text())
    before = {p: p.read_bytes() for p in checkout.rglob("*") if p.is_file() and ".git" not in p.parts}
    out = tmp_path / "run"
    code = main(["run", "--repo", str(checkout), "--problem-file", str(problem), "--test-cmd",
                 "python -m pytest -rA -q", "--model", f"scripted:{script(tmp_path)}", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    assert "left out as secrets (1): .env" in captured.err
    assert f"harness apply {out}" in captured.out

    listing = [r.content for m in load_trajectory(out / "trajectory.jsonl") for r in m.tool_results][0]
    files = {line.strip() for line in listing.splitlines() if line.strip().startswith("./")}
    files = {f for f in files if not f.startswith("./.git/")}          # the agent's own repository
    assert files == {"./.gitignore", "./NOTES.md", "./pyproject.toml", "./tests/test_core.py",
                     "./wordcount/__init__.py", "./wordcount/core.py"}, listing
    assert FAKE_KEY not in (out / "trajectory.jsonl").read_text()

    result = json.loads((out / "result.json").read_text())
    assert result["tests_passed"] is True
    base = json.loads((out / "base.json").read_text())
    start = (checkout / "wordcount" / "core.py").read_bytes()
    assert base["repo"] == str(checkout.resolve()) and base["mode"] == "git"
    assert base["head"] == git(checkout, "rev-parse", "HEAD").strip()
    assert base["files"] == {"wordcount/core.py": hashlib.sha256(start).hexdigest()}
    after = {p: p.read_bytes() for p in checkout.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert after == before                     # the run only read the checkout

    status = git(checkout, "status", "--porcelain")
    assert main(["apply", str(out), "--branch", "fix/wordcount", "--yes"]) == 0       # a commit; nothing else touched
    assert git(checkout, "status", "--porcelain") == status
    assert (checkout / "wordcount" / "core.py").read_bytes() == start
    assert "wordcount/core.py" in git(checkout, "show", "--stat", "fix/wordcount")
    assert main(["apply", str(out), "--yes"]) == 0                           # into the working tree
    fixed = (checkout / "wordcount" / "core.py").read_text()
    assert "return ranked[:n]" in fixed and (checkout / ".env").read_text() == f"API_KEY={FAKE_KEY}\n"
    assert (checkout / "NOTES.md").read_text() == "uncommitted work in progress\n"
    (checkout / "wordcount" / "core.py").write_text(fixed + "# the operator's own edit\n")
    capsys.readouterr()
    assert main(["apply", str(out), "--yes"]) == 1                           # changed since the run: refused
    assert "wordcount/core.py" in capsys.readouterr().err
    assert (checkout / "wordcount" / "core.py").read_text() == fixed + "# the operator's own edit\n"


def test_repo_options_are_checked_before_anything_runs(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--repo", str(checkout), "--model", "empty"]) == 2
    assert "give the problem exactly once" in capsys.readouterr().err
    assert main(["run", str(WORDCOUNT), "--problem", "x", "--model", "empty"]) == 2
    assert "--problem go with --repo PATH" in capsys.readouterr().err
    assert main(["run", "--repo", str(checkout / "nope"), "--problem", "x", "--model", "empty"]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_tasks_new_turns_a_folder_outside_git_into_a_task_that_runs(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain"
    shutil.copytree(WORDCOUNT / "repo", plain)
    (plain / "pyproject.toml").write_text(PYPROJECT)
    (plain / "NOTES.md").write_text("notes\n")
    (plain / "env" / "bin").mkdir(parents=True)                 # a virtualenv under any name
    (plain / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (plain / ".env").write_text(f"API_KEY={FAKE_KEY}\n")
    checkout = plain
    problem = tmp_path / "bug.md"
    problem.write_text((WORDCOUNT / "problem.md").read_text())
    out = tmp_path / "tasks" / "wordcount-local"
    code = main(["tasks", "new", "--repo", str(checkout), "--problem-file", str(problem), "--test-cmd",
                 "python -m pytest -rA -q", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:] + captured.out
    meta = json.loads((out / "task.json").read_text())
    expected = json.loads((WORDCOUNT / "task.json").read_text())
    assert meta["FAIL_TO_PASS"] == sorted(expected["FAIL_TO_PASS"])
    assert meta["PASS_TO_PASS"] == expected["PASS_TO_PASS"]
    assert any(r.startswith("pytest==") for r in meta["requirements"])
    assert (out / "repo" / "NOTES.md").is_file() and not (out / "repo" / ".env").exists()
    assert not (out / "repo" / "env").exists() and (out / "problem.md").read_text().strip()
    assert main(["run", str(out), "--model", "scripted:wordcount-fix", "--out", str(tmp_path / "run")]) == 0


def test_a_dependency_that_cannot_be_had_offline_stops_the_run_before_the_model_is_called(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "requirements.txt").write_text("harness-no-such-package-xyz==1.0\n")
    (plain / "m.py").write_text("def f():\n    return 1\n")
    out = tmp_path / "run"
    assert main(["run", "--repo", str(plain), "--problem", "f returns 1", "--model", "empty", "--out", str(out)]) == 3
    err = capsys.readouterr().err
    assert "harness-no-such-package-xyz" in err and "do not resolve" in err
    assert not (out / "trajectory.jsonl").exists()


def test_a_run_started_inside_the_folder_writes_its_files_outside_it(checkout: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    repo = repo_task(checkout, "total is wrong")
    try:
        config = load()[0]
        monkeypatch.chdir(checkout / "wordcount")
        inside = default_out(repo.task, repo, config)
        assert not inside.resolve().is_relative_to(checkout.resolve())
        assert inside.parent == config.approval.state_dir / "runs"
        monkeypatch.chdir(tmp_path)
        assert default_out(repo.task, repo, config).parts[0] == "runs"
    finally:
        repo.cleanup()
    assert not repo.staged.exists()

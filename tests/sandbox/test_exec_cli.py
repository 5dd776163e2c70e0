"""`harness exec`: prints what the model would see and exits with the command's exit code."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HARNESS = str(REPO / ".venv" / "bin" / "harness")


def _exec(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HARNESS, "exec", *args], capture_output=True, text=True, timeout=300, cwd=REPO)


def test_exec_prints_the_observation_and_exits_with_the_command_code(project_dir: Path) -> None:
    done = _exec("--dir", str(project_dir), "--", "cat README.md; exit 3")
    assert done.returncode == 3
    lines = done.stdout.splitlines()
    assert lines[0].startswith("[exit 3 · ") and lines[1] == "a small project"


def test_exec_succeeds_with_exit_code_zero(project_dir: Path) -> None:
    done = _exec("--dir", str(project_dir), "--", "python3", "-c", "'import pkg; print(pkg.VALUE)'")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == "1"


def test_exec_json_gives_the_structured_result(project_dir: Path) -> None:
    done = _exec("--json", "--dir", str(project_dir), "--", "echo out; echo err >&2; exit 2")
    assert done.returncode == 2
    data = json.loads(done.stdout)
    assert data["exit_code"] == 2 and data["timed_out"] is False
    assert data["stdout"]["head"] == "out\n" and data["stderr"]["head"] == "err\n"
    assert data["observation"].startswith("[exit 2 · ")
    assert data["command"] == "echo out; echo err >&2; exit 2"


def test_exec_timeout_exits_124_and_says_it_was_killed() -> None:
    done = _exec("--timeout", "1", "--", "echo started; sleep 30")
    assert done.returncode == 124
    assert done.stdout.startswith("[timeout · ")
    assert "the command was killed after its 1s timeout" in done.stdout and "started" in done.stdout


def test_exec_without_a_command_explains_how_to_give_one() -> None:
    done = _exec("--dir", ".")
    assert done.returncode == 125
    assert "no command given; put it after --, e.g. harness exec --dir . -- python -m pytest -q" in done.stderr


def test_exec_with_a_missing_folder_says_which_and_what_to_pass(tmp_path: Path) -> None:
    done = _exec("--dir", str(tmp_path / "nope"), "--", "true")
    assert done.returncode == 125
    assert f"project directory {str(tmp_path / 'nope')!r} does not exist" in done.stderr


def test_shell_runs_each_line_and_prints_the_observation(project_dir: Path) -> None:
    done = subprocess.run([HARNESS, "shell", "--dir", str(project_dir)], input="cat README.md\nfalse\nexit\n",
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "a small project" in done.stdout
    assert "(no output: the command failed with exit code 1)" in done.stdout


def test_exec_without_a_docker_daemon_says_how_to_start_one(tmp_path: Path) -> None:
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    done = subprocess.run([HARNESS, "exec", "--", "true"], capture_output=True, text=True, timeout=120, cwd=REPO,
                          env=env)
    assert done.returncode == 125
    assert "cannot reach the Docker daemon" in done.stderr and "start it" in done.stderr


def test_exec_sees_the_workspace_a_session_gets_a_git_repository_of_the_starting_files(project_dir: Path) -> None:
    done = _exec("--dir", str(project_dir), "--", "git log --format=%s && git status --porcelain && git ls-files")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[1:] == ["starting state", "README.md", "pkg/__init__.py"]   # one commit, clean
    changed = _exec("--dir", str(project_dir), "--", "echo more >> README.md && git status --porcelain")
    assert changed.returncode == 0 and changed.stdout.splitlines()[1:] == [" M README.md"]   # git sees the edit


"""The package as a user gets it: the demo task ships in the wheel, and an installed harness repairs it.

tasks/wordcount is the source of the demo task; harness/data/tasks/wordcount is the copy the package
ships. The first test fails when they differ (copy tasks/wordcount over the packaged one to fix it).
The wheel test builds from a copy of the sources (nothing lands in the checkout) and needs the
package index pip is configured with: the build backend and the dependencies come from there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.cli.demo_cmd import DEMO_TASK, copy_tree, packaged_task

REPO_ROOT = Path(__file__).resolve().parent.parent
SOURCE_TASK = REPO_ROOT / "tasks" / DEMO_TASK
PACKAGED_TASK = Path("harness") / "data" / "tasks" / DEMO_TASK
BUILD_INPUTS = ("pyproject.toml", "README.md", "harness", "sandbox")
KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "HARNESS_MODEL")


def _files(root: Path) -> dict[str, bytes]:
    """Every file under `root` by relative path, without byte-code."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def test_the_packaged_demo_task_is_identical_to_tasks_wordcount() -> None:
    source, packaged = _files(SOURCE_TASK), _files(REPO_ROOT / PACKAGED_TASK)
    assert sorted(source) == sorted(packaged), "copy tasks/wordcount over harness/data/tasks/wordcount"
    differing = [name for name in source if source[name] != packaged[name]]
    assert differing == [], f"{differing} differ: copy tasks/wordcount over harness/data/tasks/wordcount"
    assert {"task.json", "problem.md", "repo/wordcount/core.py", "repo/tests/test_core.py"} <= set(source)


def test_the_demo_runs_on_a_temporary_copy_of_the_packaged_task() -> None:
    with packaged_task(DEMO_TASK) as folder:
        assert _files(folder) == _files(SOURCE_TASK)
    assert not folder.exists()   # removed when the demo ends


def test_byte_code_an_installer_compiled_beside_the_task_is_not_copied(tmp_path: Path) -> None:
    shelf = tmp_path / "installed"
    shutil.copytree(SOURCE_TASK, shelf)
    (shelf / "repo" / "wordcount" / "__pycache__").mkdir()
    (shelf / "repo" / "wordcount" / "__pycache__" / "core.cpython-311.pyc").write_bytes(b"\0")
    (shelf / "repo" / "stray.pyc").write_bytes(b"\0")
    copy_tree(shelf, tmp_path / "copy")   # a Path is a Traversable, as the package's resources are
    copied = sorted(p.relative_to(tmp_path / "copy").as_posix() for p in (tmp_path / "copy").rglob("*")
                    if p.is_file())
    assert copied == sorted(_files(SOURCE_TASK))


@pytest.mark.docker
@pytest.mark.slow
def test_the_built_wheel_installed_in_a_fresh_venv_repairs_the_demo_task(sandbox_image: str, tmp_path: Path) -> None:
    src = tmp_path / "src"   # built from a copy: no build/ or *.egg-info lands in the checkout
    src.mkdir()
    for name in BUILD_INPUTS:
        if (REPO_ROOT / name).is_dir():
            shutil.copytree(REPO_ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(REPO_ROOT / name, src / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(src)])
    (wheel,) = (tmp_path / "dist").glob("harness-*.whl")
    members = zipfile.ZipFile(wheel).namelist()
    shipped = {m[len(PACKAGED_TASK.as_posix()) + 1:] for m in members if m.startswith(PACKAGED_TASK.as_posix() + "/")}
    assert shipped == set(_files(SOURCE_TASK))
    assert [m for m in members if "__pycache__" in m or m.endswith(".pyc")] == []
    scripts = REPO_ROOT / "harness" / "container_scripts"   # the scripts run in containers, shell ones included
    wanted = {f"harness/container_scripts/{p.name}" for p in scripts.iterdir() if p.suffix in (".py", ".sh")}
    assert len(wanted) == 14 and wanted <= set(members), f"not in the wheel: {sorted(wanted - set(members))}"

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)])
    elsewhere = tmp_path / "elsewhere"   # no tasks/ folder and no source tree in sight
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in KEYS and k != "PYTHONPATH"}
    env["HARNESS_STATE_DIR"] = str(tmp_path / "state")
    done = subprocess.run([str(venv / "bin" / "harness"), "demo", "--out", str(tmp_path / "run")], cwd=elsewhere,
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "model scripted:wordcount-fix: no ANTHROPIC_API_KEY or OPENAI_API_KEY set" in done.stdout
    assert "+    return ranked[:n]" in done.stdout
    assert "4 passed" in done.stdout and "wordcount: tests pass" in done.stdout
    assert not (elsewhere / "tasks").exists()


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"

"""Helper processes on the host never import the project the operator stands in."""

from __future__ import annotations

import marshal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.interpreter import python_command
from harness.models.local_server import LocalServer
from harness.tools.retrieval import analysis

HIJACKED = ("harness", "pip", "ray", "llama_cpp")


@pytest.fixture
def hostile_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder, the current directory, holding packages named as those our helpers import;
    importing one leaves a mark and exits."""
    project = tmp_path / "project"
    for name in HIJACKED:
        (project / name).mkdir(parents=True)
        code = f"open({str(tmp_path / ('RAN-' + name))!r}, 'w').write('x')\nraise SystemExit(0)\n"
        (project / name / "__init__.py").write_text(code)
        (project / name / "__main__.py").write_text(code)
    monkeypatch.chdir(project)
    return tmp_path


def _marks(root: Path) -> list[str]:
    return sorted(p.name for p in root.glob("RAN-*"))


def test_a_helper_python_started_inside_a_project_imports_ours_not_the_projects(hostile_project: Path) -> None:
    plain = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, timeout=60,
                           check=False)
    assert (plain.stdout, _marks(hostile_project)) == ("", ["RAN-pip"])    # the control: the project's pip ran
    (hostile_project / "RAN-pip").unlink()
    ours = subprocess.run(python_command("-m", "pip", "--version"), capture_output=True, text=True, timeout=60,
                          check=True)
    assert ours.stdout.startswith("pip ") and _marks(hostile_project) == []


def test_find_codes_workers_started_inside_a_project_run_our_analysis(
        hostile_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analysis, "PROCESS_MIN_BYTES", 1)
    monkeypatch.setattr(analysis, "TASK_BYTES", 200)
    started: list[subprocess.Popen[bytes]] = []
    start = analysis._start_worker
    monkeypatch.setattr(analysis, "_start_worker", lambda: started.append(start()) or started[-1])
    items = [(f"k{i}", f"m{i}.py", f"def f{i}(x):\n    return x + {i}\n".encode()) for i in range(30)]
    by_workers: dict[str, bytes] = {}
    left_to_the_thread: list[str] = []
    real_each = analysis._analyse_each
    monkeypatch.setattr(analysis, "_analyse_each", lambda work: left_to_the_thread.extend(k for k, _, _ in work)
                        or real_each(work))
    assert analysis.analyse_many(items, by_workers.update, workers=2) == 30
    assert len(started) == 2 and left_to_the_thread == [] and _marks(hostile_project) == []
    assert _loaded(by_workers) == _loaded(real_each(items))


def _loaded(packed: dict[str, bytes]) -> dict[str, object]:
    return {key: marshal.loads(data) for key, data in packed.items()}


def test_the_local_model_server_is_started_with_the_current_folder_off_its_path(hostile_project: Path) -> None:
    server = LocalServer(hostile_project / "m.gguf", chat_format="chatml", n_ctx=512)
    assert server.command()[:4] == [sys.executable, "-P", "-m", "harness.models.llama_serve"]

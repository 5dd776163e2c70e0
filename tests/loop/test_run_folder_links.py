"""Run folders are private and never written through links: `harness run --resume DIR` into a folder
where links were planted (tests.txt, result.json pointing at a file outside) is refused before anything
runs, and the file outside is left as it was; a normal resume still works, and every folder of a run
is 0700 and every file 0600 whatever the umask."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.agent.trajectory import TrajectoryWriter
from harness.cli.main import main
from harness.errors import UnsafePathError
from harness.messages import system, user
from harness.models.scripted import resolve_script

REPO_ROOT = Path(__file__).resolve().parents[2]
TASK = str(REPO_ROOT / "tasks" / "wordcount")
PRECIOUS = "export PATH=/usr/bin\n# the operator's shell start-up file\n"


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file outside the run folder that a planted link points at (a shell start-up file, say)."""
    path = tmp_path_factory.mktemp("home") / ".bashrc"
    path.write_text(PRECIOUS)
    return path


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "HARNESS_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path_factory.mktemp("state")))


def _rest_of_script(where: Path) -> str:
    rest = where / "rest.json"
    rest.write_text(json.dumps({"turns": json.loads(resolve_script("wordcount-fix").read_text())["turns"][3:]}))
    return f"scripted:{rest}"


def _modes(folder: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(folder.stat().st_mode)}
    for path in folder.rglob("*"):
        found[str(path.relative_to(folder))] = stat.S_IMODE(path.lstat().st_mode)
    return found


@pytest.mark.docker
def test_resume_into_a_folder_with_planted_links_is_refused_and_the_file_outside_is_unchanged(
        sandbox_image: str, cli_env: None, outside: Path, tmp_path: Path, umask_022: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    assert main(["run", TASK, "--model", "scripted:wordcount-fix", "--out", str(run), "--max-turns", "3"]) == 0
    script = _rest_of_script(tmp_path)
    for name in ("tests.txt", "result.json"):
        (run / name).unlink()
        (run / name).symlink_to(outside)
    trajectory_before = (run / "trajectory.jsonl").read_bytes()
    capsys.readouterr()

    code = main(["run", TASK, "--model", script, "--resume", str(run)])

    err = capsys.readouterr().err
    assert code == 2, err
    assert re.search(rf"harness: error: refusing output folder {re.escape(str(run))}: \S+/(tests\.txt|result\.json) "
                     r"is a symbolic link", err), err
    assert outside.read_text() == PRECIOUS
    assert (run / "trajectory.jsonl").read_bytes() == trajectory_before     # refused before anything moved
    assert not (run / "trajectory.before-resume.jsonl").exists()

    # positive control: without the links the same resume finishes the run, in a private folder
    for name in ("tests.txt", "result.json"):
        (run / name).unlink()
    assert main(["run", TASK, "--model", script, "--resume", str(run)]) == 0
    assert "stopped: end (the agent finished) · 5 turn(s)" in capsys.readouterr().out
    assert json.loads((run / "result.json").read_text())["tests_passed"] is True
    assert "[exit 0]" in (run / "tests.txt").read_text()
    assert outside.read_text() == PRECIOUS
    modes = _modes(run)
    assert modes == {name: 0o700 if name == "." else 0o600 for name in modes}, modes
    assert set(modes) >= {"trajectory.jsonl", "trajectory.before-resume.jsonl", "patch.diff", "tests.txt",
                          "result.json"}


def test_trajectory_is_never_written_through_a_link(outside: Path, tmp_path: Path) -> None:
    path = tmp_path / "trajectory.jsonl"
    path.symlink_to(outside)
    for append in (False, True):
        with pytest.raises(UnsafePathError, match=r"trajectory.jsonl: it is a symbolic link \(to "):
            TrajectoryWriter(path, append=append)
    assert outside.read_text() == PRECIOUS

    writer = TrajectoryWriter(tmp_path / "real.jsonl")     # positive control: a real file, 0600
    writer.write_all([system("s"), user("u")])
    (tmp_path / "real.jsonl").rename(tmp_path / "moved.jsonl")
    (tmp_path / "real.jsonl").symlink_to(outside)           # swapped for a link between two lines
    with pytest.raises(UnsafePathError, match=r"real.jsonl: it is a symbolic link"):
        writer.write(user("more"))
    assert outside.read_text() == PRECIOUS
    assert len((tmp_path / "moved.jsonl").read_text().splitlines()) == 2
    assert stat.S_IMODE((tmp_path / "moved.jsonl").stat().st_mode) == 0o600

"""`harness run` and `harness demo` from the command line, on the real sandbox with scripted models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.models.scripted import resolve_script

REPO_ROOT = Path(__file__).resolve().parents[2]
TASK = str(REPO_ROOT / "tasks" / "wordcount")

pytestmark = pytest.mark.docker


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch, sandbox_image: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "HARNESS_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path_factory.mktemp("state")))   # the approval queue


def test_run_prints_a_summary_and_writes_the_run_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", TASK, "--model", "scripted:wordcount-fix", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "wordcount: tests pass · stopped: end (the agent finished) · 5 turn(s)" in out
    assert "patch: 1 file(s), +2 -2" in out
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["config"]["model"]["spec"] == "scripted:wordcount-fix" and result["tests_passed"] is True
    assert {p.name for p in tmp_path.iterdir()} >= {"trajectory.jsonl", "patch.diff", "result.json", "tests.txt"}


def test_run_json_prints_result_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", TASK, "--model", "scripted:wordcount-fix", "--out", str(tmp_path), "--json",
                 "--max-turns", "2"])
    result = json.loads(capsys.readouterr().out)
    assert code == 1                     # cut by the cap before any fix: the tests fail
    assert (result["stop_reason"], result["turns"], result["tests_passed"]) == ("cap", 2, False)
    assert result["config"]["loop"]["max_turns"] == 2


def test_run_resumes_in_place_with_the_rest_of_the_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", TASK, "--model", "scripted:wordcount-fix", "--out", str(tmp_path), "--max-turns", "3"]) == 0
    rest = tmp_path / "rest.json"
    rest.write_text(json.dumps({"turns": json.loads(resolve_script("wordcount-fix").read_text())["turns"][3:]}))
    capsys.readouterr()
    assert main(["run", TASK, "--model", f"scripted:{rest}", "--resume", str(tmp_path)]) == 0
    assert "stopped: end (the agent finished) · 5 turn(s)" in capsys.readouterr().out
    assert (tmp_path / "trajectory.before-resume.jsonl").is_file()
    assert len((tmp_path / "trajectory.jsonl").read_text().splitlines()) == 11


def test_run_refuses_a_missing_task_and_a_bad_turn_count(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "no/such/task", "--model", "scripted:wordcount-fix"]) == 2
    assert "task directory 'no/such/task' does not exist" in capsys.readouterr().err
    assert main(["run", TASK, "--model", "scripted:wordcount-fix", "--max-turns", "0"]) == 2
    assert "--max-turns must be at least 1, got 0; e.g. --max-turns 3" in capsys.readouterr().err


def test_run_without_model_or_key_says_how_to_choose_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", TASK]) == 2
    err = capsys.readouterr().err
    assert "no model given and no API key found: set ANTHROPIC_API_KEY or OPENAI_API_KEY" in err
    assert "--model scripted:wordcount-fix" in err


def test_demo_without_a_key_replays_the_recorded_repair_and_shows_tests_passing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "model scripted:wordcount-fix: no ANTHROPIC_API_KEY or OPENAI_API_KEY set" in out
    assert "-> edit" in out and "3 failed, 1 passed" in out
    assert "+    return ranked[:n]" in out
    assert "4 passed" in out and "wordcount: tests pass" in out


def test_cost_budget_with_a_price_stops_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    turn = {"content": [{"type": "tool_use", "name": "bash", "input": {"command": "true"}}],
            "usage": {"input_tokens": 1_000_000, "output_tokens": 0}}
    script = tmp_path / "costly.json"
    script.write_text(json.dumps({"turns": [turn] * 5}))
    code = main(["run", TASK, "--model", f"scripted:{script}", "--out", str(tmp_path / "out"), "--json",
                 "--price", "3", "15", "--max-cost", "5"])
    result = json.loads(capsys.readouterr().out)
    assert code == 1
    assert (result["stop_reason"], result["turns"], result["cost_usd"]) == ("budget", 2, 6.0)
    assert "cost budget spent: $6.0000 >= loop.max_cost_usd $5.0" in result["final_text"]
    assert main(["run", TASK, "--model", f"scripted:{script}", "--max-cost", "5"]) == 2
    assert "loop.max_cost_usd is set (5.0) but model.prices has no price" in capsys.readouterr().err


def test_resume_of_a_folder_without_a_trajectory_says_what_to_pass(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "attempt-1").mkdir()
    (tmp_path / "attempt-1" / "trajectory.jsonl").write_text("")
    assert main(["run", TASK, "--model", "scripted:wordcount-fix", "--resume", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"--resume {tmp_path}: there is no {tmp_path}/trajectory.jsonl" in err
    assert f"the attempts' folders are: {tmp_path}/attempt-1" in err

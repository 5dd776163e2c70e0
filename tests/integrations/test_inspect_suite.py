"""The shipped tasks as an Inspect eval (the real inspect-ai package, harness[inspect]): `inspect eval
harness/task_suite`, found through the provider's entry point, each sample in its own harness sandbox on its
task's image; the gold patches score every task correct, no change scores every one incorrect.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("inspect_ai", reason="the inspect extra is not installed: pip install -e '.[inspect]'")

from harness.core import find_task_dirs, load_task, patched_files  # noqa: E402
from harness.integrations.inspect_suite import files_of_tests  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"
SHIPPED = sorted(load_task(d).id for d in find_task_dirs([TASKS]))


def _inspect_eval(folder: Path, *args: str, task: str = "harness/task_suite") -> dict[str, Any]:
    """One `inspect eval` of `task` (the suite over the shipped tasks) run in `folder`; its log, read back."""
    inspect, log_dir = Path(sys.executable).with_name("inspect"), folder / "logs"
    given = ("-T", f"tasks={TASKS}") if task == "harness/task_suite" else ()
    proc = subprocess.run([str(inspect), "eval", task, *given, "--model",
                           "mockllm/model", "--log-dir", str(log_dir), "--log-format", "json", "--display", "plain",
                           "--max-samples", "2", *args],
                          capture_output=True, text=True, timeout=3600, cwd=folder)
    # no PYTHONPATH of ours: the checkout's harness.egg-info (left by `pip install -e .`) would then be the
    # distribution Inspect finds, without the editable install's direct_url.json, and Inspect would
    # register the suite as `task_suite` instead of `harness/task_suite`
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (found,) = log_dir.glob("*.json")
    log: dict[str, Any] = json.loads(found.read_text())
    assert log["status"] == "success", log.get("error")
    return log


def _scores(log: dict[str, Any]) -> dict[str, str]:
    scores = {}
    for sample in log["samples"]:
        assert sample.get("error") is None, (sample["id"], sample["error"])
        scores[sample["id"]] = sample["scores"]["task_tests"]["value"]
    return scores


def test_the_gold_patches_score_every_shipped_task_correct(tmp_path: Path) -> None:
    log = _inspect_eval(tmp_path, "--solver", "harness/reference_patch", "-S", "patch=gold")
    assert log["eval"]["task"] == "harness/task_suite"
    assert _scores(log) == {task: "C" for task in SHIPPED}, [
        (s["id"], s["scores"]["task_tests"]["explanation"]) for s in log["samples"]]
    wordcount = next(s for s in log["samples"] if s["id"] == "wordcount")
    status = wordcount["scores"]["task_tests"]["metadata"]["tests_status"]
    assert len(status["FAIL_TO_PASS"]["success"]) == 3 and status["FAIL_TO_PASS"]["failure"] == []


def test_no_change_scores_every_shipped_task_incorrect(tmp_path: Path) -> None:
    log = _inspect_eval(tmp_path, "--solver", "harness/reference_patch", "-S", "patch=empty")
    assert _scores(log) == {task: "I" for task in SHIPPED}
    for sample in log["samples"]:     # the tests ran: the FAIL_TO_PASS ones failed, the others passed
        status = sample["scores"]["task_tests"]["metadata"]["tests_status"]
        assert status["FAIL_TO_PASS"]["failure"] and status["FAIL_TO_PASS"]["success"] == [], sample["id"]


def test_an_agent_that_rewrites_the_tests_is_scored_on_the_tasks_own_tests(tmp_path: Path) -> None:
    """The scorer puts the starting test files back before it runs them: a solver that replaced every
    required test with one that passes is scored incorrect (the gold run above is the positive control)."""
    cheat = Path(__file__).with_name("inspect_cheat.py")
    log = _inspect_eval(tmp_path, task=f"{cheat}@cheating")
    assert _scores(log) == {"wordcount": "I"}
    status = log["samples"][0]["scores"]["task_tests"]["metadata"]["tests_status"]
    assert len(status["FAIL_TO_PASS"]["failure"]) == 3


def test_the_test_files_are_those_the_test_patch_touches_and_the_test_ids_name() -> None:
    wordcount = load_task(TASKS / "wordcount")
    assert wordcount.test_patch is None and files_of_tests(wordcount) == ["tests/test_core.py"]
    cart = load_task(TASKS / "cart")
    assert cart.test_patch is not None
    assert set(files_of_tests(cart)) == set(patched_files(cart.test_patch)) | {
        t.split("::")[0] for t in (*cart.fail_to_pass, *cart.pass_to_pass)}

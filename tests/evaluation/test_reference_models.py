"""On every shipped task the gold patch is resolved and the empty patch is not, through the whole
pipeline: environment image, agent session with the real tools, grading in a fresh container."""

from __future__ import annotations

from pathlib import Path

from harness.core.task import find_task_dirs, load_task
from harness.evaluation.options import EvalOptions
from harness.evaluation.runner import run_evaluation

from .conftest import TASKS, TEST_LABELS


def _evaluate(model: str, out: Path, config_and_secrets) -> dict:  # type: ignore[no-untyped-def,type-arg]
    tasks = [load_task(d) for d in find_task_dirs([TASKS])]
    config, secrets = config_and_secrets
    options = EvalOptions(out_dir=out, model=model, workers=2, labels=TEST_LABELS)
    return run_evaluation(tasks, options, config, secrets)


def test_gold_resolves_every_shipped_task_and_empty_resolves_none(tmp_path, docker_client, config_and_secrets):
    gold = _evaluate("gold", tmp_path / "gold", config_and_secrets)
    assert gold["error_ids"] == [], gold["instances"]
    assert gold["resolved_ids"] == gold["submitted_ids"]
    assert len(gold["submitted_ids"]) >= 7

    empty = _evaluate("empty", tmp_path / "empty", config_and_secrets)
    assert empty["error_ids"] == [], empty["instances"]
    assert empty["resolved_ids"] == []
    assert empty["empty_patch_ids"] == empty["submitted_ids"]
    for iid in empty["submitted_ids"]:   # the tests really ran at the base state, and failed there
        report = (tmp_path / "empty" / "instances" / iid / "report.json").read_text()
        assert '"resolved": false' in report and '"FAIL_TO_PASS"' in report

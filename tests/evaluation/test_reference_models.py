"""On every shipped task the gold patch is resolved and the empty patch is not, through the whole
pipeline: environment image, agent session with the real tools, grading in a fresh container."""

from __future__ import annotations

from pathlib import Path

import docker

from harness.core.task import find_task_dirs, load_task
from harness.evaluation.options import RUN_LABEL, EvalOptions
from harness.evaluation.progress import SilentEvents
from harness.evaluation.runner import run_evaluation

from .conftest import TASKS, TEST_LABELS


class Messages(SilentEvents):
    def __init__(self) -> None:
        self.said: list[str] = []

    def message(self, text: str) -> None:
        self.said.append(text)


def _evaluate(model: str, out: Path, config_and_secrets, pool: int = 0,  # type: ignore[no-untyped-def]
              events: Messages | None = None) -> dict:  # type: ignore[type-arg]
    tasks = [load_task(d) for d in find_task_dirs([TASKS])]
    config, secrets = config_and_secrets
    options = EvalOptions(out_dir=out, model=model, workers=2, labels=TEST_LABELS, pool=pool)
    return run_evaluation(tasks, options, config, secrets, events=events).to_dict()


def test_gold_resolves_every_shipped_task_and_empty_resolves_none(tmp_path, docker_client, config_and_secrets):
    events = Messages()   # gold with a warm pool: every session and grading sandbox started ahead, none left
    gold = _evaluate("gold", tmp_path / "gold", config_and_secrets, pool=1, events=events)
    assert gold["error_ids"] == [], gold["instances"]
    assert gold["resolved_ids"] == gold["submitted_ids"]
    assert {i: e["tests_resolved"] for i, e in gold["instances"].items()} == dict.fromkeys(gold["submitted_ids"], True)
    assert len(gold["submitted_ids"]) >= 7
    n = 2 * len(gold["submitted_ids"])
    assert f"warm pool: {n} of {n} sandbox(es) taken from the pool, 0 started on demand, 0 started ahead " \
           "and not needed" in events.said, events.said
    # the tests' own evaluations (another evaluation may run on the same machine: its containers are its own)
    mine = [RUN_LABEL, *(f"{key}={value}" for key, value in TEST_LABELS.items())]
    assert docker.from_env().containers.list(all=True, filters={"label": mine}) == []

    empty = _evaluate("empty", tmp_path / "empty", config_and_secrets)
    assert empty["error_ids"] == [], empty["instances"]
    assert empty["resolved_ids"] == []
    assert empty["empty_patch_ids"] == empty["submitted_ids"]
    # report.json keeps the tests' verdict on each empty patch (a row whose tests pass unpatched shows there)
    verdicts = {i: e["tests_resolved"] for i, e in empty["instances"].items()}
    assert verdicts == dict.fromkeys(empty["submitted_ids"], False)
    for iid in empty["submitted_ids"]:   # the tests really ran at the base state, and failed there
        report = (tmp_path / "empty" / "instances" / iid / "report.json").read_text()
        assert '"resolved": false' in report and '"FAIL_TO_PASS"' in report

"""--resume: finished instances are kept as they are, half-finished ones are rerun from scratch, and
nothing is lost or written twice; Ctrl-C removes every container of the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from harness.errors import ConfigError
from harness.evaluation.instances import Prediction
from harness.evaluation.runner import EvalOptions, run_evaluation
from harness.evaluation.tasks import load_task

from .conftest import TASKS, TEST_LABELS

REPO_ROOT = TASKS.parent


def _gold(names: list[str]) -> tuple[list, dict[str, Prediction]]:  # type: ignore[type-arg]
    tasks = [load_task(TASKS / n) for n in names]
    return tasks, {t.id: Prediction(t.id, "gold", t.gold_patch) for t in tasks}


def test_resume_keeps_finished_instances_and_reruns_half_finished_ones(tmp_path, docker_client, config_and_secrets):
    config, secrets = config_and_secrets
    tasks, preds = _gold(["wordcount", "cart"])
    out = tmp_path / "out"
    run_evaluation(tasks, EvalOptions(out_dir=out, labels=TEST_LABELS), config, secrets, predictions=preds)
    finished = out / "instances" / "wordcount" / "done"
    stamp = finished.stat().st_mtime_ns
    half = out / "instances" / "cart"
    (half / "done").unlink()                      # as if the run stopped while grading cart
    (half / "leftover.txt").write_text("from the interrupted run")

    with pytest.raises(ConfigError, match="already holds an evaluation \\(run.json\\); pass --resume"):
        run_evaluation(tasks, EvalOptions(out_dir=out, labels=TEST_LABELS), config, secrets, predictions=preds)
    report = run_evaluation(tasks, EvalOptions(out_dir=out, resume=True, labels=TEST_LABELS), config, secrets,
                            predictions=preds)

    assert finished.stat().st_mtime_ns == stamp
    assert (half / "done").is_file() and not (half / "leftover.txt").exists()
    assert report["resolved_ids"] == ["cart", "wordcount"]
    ids = [json.loads(x)["instance_id"] for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert sorted(ids) == ["cart", "wordcount"]


def test_resume_refuses_another_model(tmp_path, docker_client, config_and_secrets):
    config, secrets = config_and_secrets
    tasks, preds = _gold(["wordcount"])
    out = tmp_path / "out"
    run_evaluation(tasks, EvalOptions(out_dir=out, labels=TEST_LABELS), config, secrets, predictions=preds)
    with pytest.raises(ConfigError, match="was run with model 'gold', not 'empty'"):
        run_evaluation(tasks, EvalOptions(out_dir=out, model="empty", resume=True, labels=TEST_LABELS),
                       config, secrets)


def _containers(docker_client, run_label: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Ids of the run's containers (low-level listing: containers come and go while we look)."""
    found = docker_client.api.containers(all=True, filters={"label": f"eval.test.run={run_label}"})
    return [c["Id"] for c in found]


def test_ctrl_c_removes_every_container_and_resume_finishes_the_run(tmp_path, docker_client):
    out = tmp_path / "out"
    label = f"ctrlc-{os.getpid()}"
    cmd = [sys.executable, "-m", "harness.cli.main", "eval", str(TASKS / "wordcount"), str(TASKS / "cart"),
           str(TASKS / "envconfig"), "--model", "gold", "--workers", "2", "--out", str(out),
           "--label", "harness.test=1", "--label", f"eval.test.run={label}"]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not _containers(docker_client, label) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert _containers(docker_client, label), "the run never started a container"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "stopped: removed" in err
    assert _containers(docker_client, label) == []

    resumed = subprocess.run(cmd + ["--resume", "--json"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["resolved_ids"] == ["cart", "envconfig", "wordcount"]
    assert _containers(docker_client, label) == []

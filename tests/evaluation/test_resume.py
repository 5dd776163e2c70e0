"""--resume: finished instances are kept as they are, half-finished ones are rerun from scratch, and
nothing is lost or written twice; Ctrl-C removes every container of the run."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.core.task import load_task
from harness.errors import ConfigError
from harness.evaluation.instance_files import Prediction
from harness.evaluation.options import EvalOptions
from harness.evaluation.report import write_atomic
from harness.evaluation.runner import run_evaluation

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
    assert report.resolved_ids == ["cart", "wordcount"]
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


def test_resume_refuses_another_agent(tmp_path, docker_client, config_and_secrets):
    """A run of the harness's own loop is not continued by a third-party agent, nor the other way round
    (report.json would mix two agents' attempts)."""
    config, secrets = config_and_secrets
    tasks, preds = _gold(["wordcount"])
    out = tmp_path / "out"
    run_evaluation(tasks, EvalOptions(out_dir=out, labels=TEST_LABELS), config, secrets, predictions=preds)
    settings = json.loads((out / "run.json").read_text())["settings"]
    assert settings["agent"] == ""
    tiny = config.replace(loop=dataclasses.replace(config.loop, agent="tiny"))
    with pytest.raises(ConfigError, match="was run by the harness's own loop, not by the agent 'tiny'; resume "
                                          "with no --agent"):
        run_evaluation(tasks, EvalOptions(out_dir=out, model="gold", resume=True, labels=TEST_LABELS), tiny, secrets)
    settings["agent"] = "tiny"
    (out / "run.json").write_text(json.dumps({**json.loads((out / "run.json").read_text()), "settings": settings}))
    with pytest.raises(ConfigError, match="was run by the agent 'tiny', not by the harness's own loop; resume "
                                          "with --agent tiny"):
        run_evaluation(tasks, EvalOptions(out_dir=out, model="gold", resume=True, labels=TEST_LABELS), config, secrets)


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
    # Ctrl-C as a terminal sends it: the child starts with SIGINT at its default even when this suite
    # runs as a background job (which inherits SIGINT ignored, and a Python child would then ignore it)
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while not _containers(docker_client, label) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert _containers(docker_client, label), "the run never started a container"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "stopping: " in err and "stopped: " in err and "run the same command with --resume" in err
    assert _containers(docker_client, label) == []

    resumed = subprocess.run(cmd + ["--resume", "--json"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["resolved_ids"] == ["cart", "envconfig", "wordcount"]
    assert _containers(docker_client, label) == []


PRECIOUS = "export PATH=/usr/bin\n# the operator's shell start-up file\n"


def _modes(folder: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(folder.stat().st_mode)}
    for path in folder.rglob("*"):
        found[str(path.relative_to(folder))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def test_eval_resume_refuses_links_planted_in_the_out_folder_and_writes_nothing_through_them(
        tmp_path, tmp_path_factory, docker_client, capsys):
    old_umask = os.umask(0o022)
    try:
        _eval_resume_with_planted_links(tmp_path, tmp_path_factory.mktemp("home"), capsys)
    finally:
        os.umask(old_umask)


def _eval_resume_with_planted_links(tmp_path: Path, home: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    cmd = ["eval", str(TASKS / "wordcount"), "--predictions", "gold", "--out", str(out),
           "--label", "harness.test=1"]
    assert main(cmd + ["--json"]) == 0
    run_json = home / ".bashrc"            # run.json's own content, so that the old code read it happily
    run_json.write_text((out / "run.json").read_text())
    before = run_json.read_text()
    (out / "run.json").unlink()
    (out / "run.json").symlink_to(run_json)
    profile = home / ".profile"
    profile.write_text(PRECIOUS)
    (out / ".report.json.tmp").symlink_to(profile)
    capsys.readouterr()

    code = main(cmd + ["--resume", "--json"])

    err = capsys.readouterr().err
    assert code == 2, err
    assert re.search(rf"harness: error: refusing output folder {re.escape(str(out))}: \S+/(run\.json|"
                     r"\.report\.json\.tmp) is a symbolic link", err), err
    assert (run_json.read_text(), profile.read_text()) == (before, PRECIOUS)

    # positive control: with the links gone, the same resume finishes and the folder is private
    (out / ".report.json.tmp").unlink()
    (out / "run.json").unlink()
    (out / "run.json").write_text(before)
    assert main(cmd + ["--resume", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["resolved_ids"] == ["wordcount"]
    assert (run_json.read_text(), profile.read_text()) == (before, PRECIOUS)
    assert json.loads((out / "run.json").read_text())["options"]["resume"] is True
    modes = _modes(out)
    assert modes == {name: 0o700 if (out / name).is_dir() else 0o600 for name in modes}, modes
    assert {"run.json", "report.json", "predictions.jsonl", "instances/wordcount/done",
            "instances/wordcount/test_output.txt", "instances/wordcount/patch.diff"} <= set(modes)


def test_atomic_writes_never_go_through_a_link(tmp_path: Path, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    outside = tmp_path_factory.mktemp("home") / ".profile"
    outside.write_text(PRECIOUS)
    (tmp_path / ".report.json.tmp").symlink_to(outside)     # a planted temporary name
    (tmp_path / "predictions.jsonl").symlink_to(outside)    # a planted destination
    write_atomic(tmp_path / "report.json", "{}\n")
    write_atomic(tmp_path / "predictions.jsonl", "")
    assert outside.read_text() == PRECIOUS
    for name, text in (("report.json", "{}\n"), ("predictions.jsonl", "")):
        path = tmp_path / name
        assert not path.is_symlink() and path.read_text() == text and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not os.path.lexists(tmp_path / ".report.json.tmp")

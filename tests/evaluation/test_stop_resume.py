"""Stop and resume, on real `harness eval tasks/* --model gold --workers 2` processes: Ctrl-C (SIGINT) or
SIGTERM lets the running instances finish and starts no other, a second one cancels them, SIGKILL
kills outright; each stopped run leaves no container and no process, writes a consistent partial
report, and `--resume` finishes it with the report of an uninterrupted run, every instance graded
once (a finished instance is never rerun, a half-finished one is rerun from scratch)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.core.task import load_task
from harness.evaluation.instance_files import Prediction
from harness.evaluation.options import EvalOptions
from harness.evaluation.runner import run_evaluation

from .conftest import TASKS

REPO_ROOT = TASKS.parent
ALL_TASKS = sorted(p.name for p in TASKS.iterdir() if (p / "task.json").is_file())
COUNTS = ("total_instances", "completed_instances", "resolved_instances", "unresolved_instances",
          "empty_patch_instances", "patch_failed_instances", "error_instances", "incomplete_instances",
          "unsupported_instances")
ID_LISTS = ("submitted_ids", "completed_ids", "resolved_ids", "unresolved_ids", "empty_patch_ids", "patch_failed_ids",
            "error_ids", "incomplete_ids", "flaky_ids", "unsupported_ids")


def eval_command(out: Path, label: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli.main", "eval", *[str(TASKS / t) for t in ALL_TASKS],
            "--model", "gold", "--workers", "2", "--out", str(out), "--label", "harness.test=1",
            "--label", f"eval.test.run={label}"]


def start(cmd: list[str]) -> subprocess.Popen[str]:
    # SIGINT at its default even when this suite runs as a background job (a Python child would inherit
    # it ignored), as a terminal's Ctrl-C finds it
    return subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def containers(docker_client: Any, label: str, *extra: str) -> list[str]:
    filters = {"label": [f"eval.test.run={label}", *extra]}
    return [c["Id"] for c in docker_client.api.containers(all=True, filters=filters)]


def processes(out: Path) -> list[str]:
    """Processes whose command line names the run's folder (the run itself and anything it started with it)."""
    found = subprocess.run(["pgrep", "-f", "-a", str(out)], capture_output=True, text=True)
    return found.stdout.splitlines()


def verdicts(report: dict[str, Any]) -> dict[str, Any]:
    """What must be equal between runs: counts, id lists and each instance's status (no times)."""
    return {"counts": {k: report[k] for k in COUNTS},
            "ids": {k: report[k] for k in ID_LISTS},
            "status": {i: row["status"] for i, row in report["instances"].items()}}


def done_stamps(out: Path) -> dict[str, tuple[int, int]]:
    """(inode, mtime) of every instance's `done`: a finished instance graded again would change them."""
    stamps = {}
    for folder in sorted((out / "instances").glob("*")) if (out / "instances").is_dir() else []:
        marker = folder / "done"
        if marker.is_file():
            st = marker.stat()
            stamps[folder.name] = (st.st_ino, st.st_mtime_ns)
    return stamps


def assert_graded_once(out: Path) -> None:
    for iid in ALL_TASKS:
        folder = out / "instances" / iid
        assert sorted(p.name for p in folder.glob("test_output*")) == ["test_output.txt"], iid
        assert len(json.loads((folder / "grading.json").read_text())) == 1, iid
        assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")], iid
    predicted = [json.loads(line)["instance_id"] for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert sorted(predicted) == ALL_TASKS


def assert_consistent_partial(out: Path) -> dict[str, tuple[int, int]]:
    """The stopped run's report counts exactly the instances whose `done` is there, the rest incomplete."""
    stamps = done_stamps(out)
    report = json.loads((out / "report.json").read_text())
    assert sorted(report["instances"]) == sorted(stamps)
    assert report["incomplete_ids"] == sorted(set(ALL_TASKS) - set(stamps))
    assert report["total_instances"] == len(ALL_TASKS)
    lines = (out / "predictions.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["instance_id"] for line in lines) == sorted(stamps)
    return stamps


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("baseline") / "out"
    done = subprocess.run(eval_command(out, f"baseline-{os.getpid()}") + ["--json"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["resolved_ids"] == ALL_TASKS        # gold resolves every shipped task
    return verdicts(report)


def wait_for(what: Callable[[], object], proc: subprocess.Popen[str], timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert proc.poll() is None, f"the run ended first: {proc.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, "timed out waiting for the run to get there"
        time.sleep(0.05)


def stop_and_resume(tmp_path: Path, docker_client: Any, signals: list[signal.Signals], at: str,
                    ) -> tuple[subprocess.Popen[str], str, dict[str, Any], dict[str, tuple[int, int]]]:
    """Run, send `signals` once the run is `at` ("started": its first container is up; "grading": a
    grading container is up), check nothing is left, resume; returns the stopped run, its stderr, the
    resumed report and the `done` stamps the stopped run left."""
    out, label = tmp_path / "out", f"stop-{os.getpid()}-{tmp_path.name}"
    cmd = eval_command(out, label)
    proc = start(cmd)
    extra = ("harness.kind=grading",) if at == "grading" else ()
    wait_for(lambda: containers(docker_client, label, *extra), proc)
    for number, sig in enumerate(signals):
        if number:
            time.sleep(0.3)
        proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
    if signals[-1] != signal.SIGKILL:
        assert containers(docker_client, label) == [], err
    assert processes(out) == []
    stamps = assert_consistent_partial(out) if (out / "report.json").is_file() else done_stamps(out)
    if signals[0] != signal.SIGKILL and len(signals) == 1:     # drained: no instance was left half-done
        assert sorted(p.name for p in (out / "instances").iterdir()) == sorted(stamps), err

    resumed = subprocess.run(cmd + ["--resume", "--json"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=1200)
    assert resumed.returncode == 0, resumed.stderr
    assert containers(docker_client, label) == []
    assert processes(out) == []
    assert {i: s for i, s in done_stamps(out).items() if i in stamps} == stamps   # finished ones not rerun
    assert_graded_once(out)
    return proc, err, json.loads(resumed.stdout), stamps


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_lets_running_instances_finish_starts_no_other_and_resume_completes_the_run(
        tmp_path: Path, docker_client: Any, uninterrupted: dict[str, Any], sig: signal.Signals) -> None:
    proc, err, report, stamps = stop_and_resume(tmp_path, docker_client, [sig], at="started")
    assert proc.returncode == 130, err
    assert "stopping: " in err and "waiting for the " in err and "stopped: the running instances finished" in err
    assert f"run the same command with --resume --out {tmp_path / 'out'}" in err
    assert 1 <= len(stamps) < len(ALL_TASKS), err         # the running ones finished; the rest never started
    assert verdicts(report) == uninterrupted


def test_a_second_ctrl_c_cancels_the_running_instances_mid_grading(
        tmp_path: Path, docker_client: Any, uninterrupted: dict[str, Any]) -> None:
    proc, err, report, _ = stop_and_resume(tmp_path, docker_client, [signal.SIGINT, signal.SIGINT], at="grading")
    assert proc.returncode == 130, err
    assert "stopped: cancelled the running instances, removed" in err
    assert verdicts(report) == uninterrupted


@pytest.mark.parametrize("at", ["started", "grading"])
def test_a_killed_run_resumes_to_the_same_report_with_no_instance_graded_twice(
        tmp_path: Path, docker_client: Any, uninterrupted: dict[str, Any], at: str) -> None:
    proc, err, report, _ = stop_and_resume(tmp_path, docker_client, [signal.SIGKILL], at=at)
    assert proc.returncode == -signal.SIGKILL, err
    assert verdicts(report) == uninterrupted


def test_a_half_written_record_is_not_taken_as_finished(tmp_path: Path, docker_client: Any,
                                                        config_and_secrets: Any) -> None:
    """What a kill during a non-atomic write would leave (a `done` cut short, a temporary beside it) is
    rerun by --resume; the whole record of the other instance is kept as it is."""
    config, secrets = config_and_secrets
    tasks = [load_task(TASKS / n) for n in ("wordcount", "cart")]
    preds = {t.id: Prediction(t.id, "gold", t.gold_patch) for t in tasks}
    out = tmp_path / "out"
    run_evaluation(tasks, EvalOptions(out_dir=out, labels={"harness.test": "1"}), config, secrets, predictions=preds)
    cut = out / "instances" / "cart" / "done"
    whole = cut.read_text()
    cut.write_text(whole[: len(whole) // 2])
    (cut.parent / ".done.tmp").write_text(whole)
    kept = done_stamps(out)["wordcount"]

    report = run_evaluation(tasks, EvalOptions(out_dir=out, resume=True, labels={"harness.test": "1"}), config,
                            secrets, predictions=preds)

    assert report.resolved_ids == ["cart", "wordcount"]
    assert json.loads(cut.read_text())["status"] == "resolved" and not (cut.parent / ".done.tmp").exists()
    assert done_stamps(out)["wordcount"] == kept


def test_a_second_ctrl_c_ends_the_run_while_an_environment_is_still_building(tmp_path: Path,
                                                                             docker_client: Any) -> None:
    """A worker blocked in a build that runs for minutes (the task's install sleeps) does not keep the
    cancelled run alive: it exits 130 within the cancel's wait and a short grace, and the build's
    process, containers and the run's host processes are gone with it."""
    task = tmp_path / "slowbuild"
    shutil.copytree(TASKS / "wordcount", task)
    meta = json.loads((task / "task.json").read_text())
    pause = f"{3000 + os.getpid() % 997}.{len(tmp_path.name)}"      # this test's own sleep, found by its argument
    meta.update(id="slowbuild", install_cmd=f"sleep {pause}")
    (task / "task.json").write_text(json.dumps(meta))
    out, label = tmp_path / "out", f"slowbuild-{os.getpid()}"
    proc = start([sys.executable, "-m", "harness.cli.main", "eval", str(task), "--model", "gold", "--out", str(out),
                  "--label", "harness.test=1", "--label", f"eval.test.run={label}"])

    def sleeping() -> bool:
        return subprocess.run(["pgrep", "-f", f"^sleep {pause}"], capture_output=True).returncode == 0

    wait_for(sleeping, proc, timeout=900)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    stopped = time.monotonic()
    _, err = proc.communicate(timeout=120)      # the cancel waits 30 s for its workers, then 5 s of grace
    waited = time.monotonic() - stopped
    assert proc.returncode == 130, err
    assert "stopped: cancelled the running instances" in err and "still blocked; ending them" in err, err
    assert waited < 90, f"{waited:.0f} s after the second Ctrl-C"
    deadline = time.monotonic() + 30
    while sleeping() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not sleeping(), "the build's process outlived the run"
    assert containers(docker_client, label) == [] and processes(out) == []
    report = json.loads((out / "report.json").read_text())
    assert report["incomplete_ids"] == ["slowbuild"]

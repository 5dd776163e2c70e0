"""`harness eval --backend ray` on a real two-node Ray cluster with the shipped tasks and --model gold:
a worker node killed mid-run, the same verdicts as the local backend, --resume, and the refusals."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.evaluation.ray_cluster import LocalCluster, RayNode, _tree

REPO = Path(__file__).resolve().parents[2]
TASKS = [str(REPO / "tasks" / name) for name in ("cart", "envconfig", "pagination")]


def _eval(out: Path, *extra: str, prelude: str = "") -> subprocess.Popen[str]:
    code = f"import sys; {prelude}from harness.cli.main import main; sys.exit(main())"
    cmd = [sys.executable, "-c", code, "eval", *TASKS, "--model", "gold", "--out", str(out),
           "--label", "harness.test=1", "--json", *extra]
    # SIGINT at its default in the child, as under a terminal, even when the suite runs as a background job
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _finish(proc: subprocess.Popen[str], timeout: float = 900) -> tuple[int, dict[str, Any], str]:
    stdout, stderr = proc.communicate(timeout=timeout)
    return proc.returncode, (json.loads(stdout) if stdout.strip() else {}), stderr


def _kill_when_it_holds_a_container(cluster: LocalCluster, node: RayNode, docker_client: Any,
                                    killed: list[str], run: subprocess.Popen[str]) -> None:
    while run.poll() is None:
        pids = {str(p) for p in _tree(node.process.pid)}
        for container in docker_client.api.containers(filters={"label": "harness.test=1"}):
            owner = (container.get("Labels") or {}).get("harness.pid")
            if owner in pids:
                cluster.kill_node(node)
                killed.append(owner)
                return
        time.sleep(0.2)


@dataclass
class Runs:
    local: dict[str, Any]
    ray: dict[str, Any]
    ray_out: Path
    killed_pid: str


@pytest.fixture(scope="module")
def runs(ray_cluster: LocalCluster, ray_worker_for_module: RayNode, docker_client: Any,
         tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The shipped tasks evaluated with the local backend, then on Ray with the worker node killed
    while it holds an instance's container."""
    root = tmp_path_factory.mktemp("eval")
    rc, local, err = _finish(_eval(root / "local"))      # also builds the environment images once
    assert rc == 0, err
    killed: list[str] = []
    run = _eval(root / "ray", "--backend", "ray", "--ray-address", ray_cluster.address)
    watcher = threading.Thread(target=_kill_when_it_holds_a_container,
                               args=(ray_cluster, ray_worker_for_module, docker_client, killed, run))
    watcher.start()
    rc, on_ray, err = _finish(run)
    watcher.join()
    assert rc == 0, err
    assert killed, "the worker node never ran an instance"
    return Runs(local, on_ray, root / "ray", killed[0])


def test_eval_on_ray_gives_the_local_backends_verdicts_and_outputs(runs: Runs) -> None:
    verdicts = {i: r["status"] for i, r in runs.ray["instances"].items()}
    assert verdicts == {i: r["status"] for i, r in runs.local["instances"].items()}
    assert set(verdicts.values()) == {"resolved"}
    strip = ("instances", "totals", "repositories", "attempts")      # the parts that hold wall times

    def counts(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {repo: {k: v for k, v in row.items() if k != "time"} for repo, row in report["repositories"].items()}

    assert {k: v for k, v in runs.ray.items() if k not in strip} == {k: v for k, v in runs.local.items()
                                                                     if k not in strip}
    assert {k: v for k, v in runs.ray["attempts"].items() if k != "totals"} == {
        k: v for k, v in runs.local["attempts"].items() if k != "totals"}
    assert counts(runs.ray) == counts(runs.local) and counts(runs.local)["(none)"]["resolved"] == len(verdicts)
    for iid in verdicts:
        for name in ("done", "trajectory.jsonl", "patch.diff", "result.json", "test_output.txt", "report.json"):
            assert (runs.ray_out / "instances" / iid / name).is_file(), (iid, name)
    predictions = (runs.ray_out / "predictions.jsonl").read_text().splitlines()
    assert sorted(json.loads(p)["instance_id"] for p in predictions) == sorted(verdicts)


def test_a_worker_killed_mid_instance_is_an_infrastructure_retry_and_its_containers_are_reaped(
        runs: Runs, docker_client: Any) -> None:
    retries = {i: r["infra_retries"] for i, r in runs.ray["instances"].items()}
    assert sorted(retries.values()) == [0] * (len(TASKS) - 1) + [1]
    retried = next(i for i, n in retries.items() if n)
    done = json.loads((runs.ray_out / "instances" / retried / "done").read_text())
    assert done["infra_retries"] == 1 and done["status"] == "resolved" and done["error"] is None
    left = docker_client.api.containers(all=True, filters={"label": f"harness.pid={runs.killed_pid}"})
    assert left == [], "the killed worker's containers were not reaped"


def test_resume_on_ray_reruns_only_the_unfinished_instance(runs: Runs, ray_cluster: LocalCluster,
                                                           ray_worker: RayNode, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(runs.ray_out, out)
    (out / "instances" / "pagination" / "done").unlink()
    before = {p.parent.name: p.stat().st_mtime_ns for p in (out / "instances").glob("*/done")}
    rc, second, err = _finish(_eval(out, "--resume", "--backend", "ray", "--ray-address", ray_cluster.address))
    assert rc == 0, err
    assert f"resuming: {len(TASKS) - 1} instance(s) already finished, 1 to run" in err
    assert {p.parent.name: p.stat().st_mtime_ns for p in (out / "instances").glob("*/done")
            if p.parent.name != "pagination"} == before
    assert second["instances"]["pagination"]["status"] == "resolved"
    assert second["resolved_ids"] == runs.ray["resolved_ids"]


def test_backend_ray_without_ray_installed_says_how_to_install_it(tmp_path: Path) -> None:
    rc, report, err = _finish(_eval(tmp_path / "out", "--backend", "ray", prelude="sys.modules['ray'] = None; "))
    assert rc == 2 and report == {}
    assert "--backend ray needs Ray, which is not installed here" in err
    assert "install it with `pip install 'harness[ray]'`" in err
    assert not (tmp_path / "out").exists()


def test_a_ray_address_without_backend_ray_is_refused(tmp_path: Path) -> None:
    rc, _, err = _finish(_eval(tmp_path / "out", "--ray-address", "10.0.0.5:6379"))
    assert rc == 2
    assert "--ray-address 10.0.0.5:6379 needs --backend ray; e.g. --backend ray --ray-address 10.0.0.5:6379" in err
    assert not (tmp_path / "out").exists()


def test_a_second_ctrl_c_cancels_the_ray_tasks_and_removes_their_containers_on_the_nodes(
        ray_cluster: LocalCluster, ray_worker: RayNode, docker_client: Any, tmp_path: Path) -> None:
    mark = f"harness.raytest={uuid.uuid4().hex[:8]}"
    proc = _eval(tmp_path / "out", "--backend", "ray", "--ray-address", ray_cluster.address, "--label", mark)
    deadline = time.monotonic() + 600      # environment images may still be built on a fresh machine
    running: list[Any] = []
    while time.monotonic() < deadline and not running and proc.poll() is None:
        running = docker_client.api.containers(filters={"label": mark})
        time.sleep(0.2)
    assert running, "no instance container started"
    proc.send_signal(signal.SIGINT)        # the first drains (tests/ray/test_ray_stop.py), the second cancels
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    rc, _, err = _finish(proc, timeout=120)
    assert rc == 130
    assert "stopped: the run's Ray tasks were cancelled and their containers removed" in err
    assert docker_client.api.containers(all=True, filters={"label": mark}) == []


def test_an_address_where_no_ray_head_answers_is_refused_at_once(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]          # closed again: nothing listens there
    started = time.monotonic()
    rc, _, err = _finish(_eval(tmp_path / "out", "--backend", "ray", "--ray-address", f"127.0.0.1:{port}"))
    assert rc == 2 and time.monotonic() - started < 30
    assert (f"cannot reach the Ray cluster at --ray-address 127.0.0.1:{port} ([Errno 111] Connection refused); "
            "give the head's address as printed by `ray start --head`") in err
    assert not (tmp_path / "out").exists()
    rc, _, err = _finish(_eval(tmp_path / "out", "--backend", "ray", "--ray-address", "head-without-port"))
    assert rc == 2 and "--ray-address 'head-without-port' is not HOST:PORT; e.g. --ray-address 10.0.0.5:6379" in err

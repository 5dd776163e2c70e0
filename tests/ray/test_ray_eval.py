"""`harness eval --backend ray` on a real two-node Ray cluster with the shipped tasks and --model gold:
a worker node killed mid-run, the same verdicts as the local backend, --resume, and the refusals."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness.evaluation.ray_cluster import LocalCluster, RayNode, _tree

REPO = Path(__file__).resolve().parents[2]
TASKS = [str(REPO / "tasks" / name) for name in ("cart", "envconfig", "pagination", "wordcount")]


def _eval(out: Path, *extra: str, prelude: str = "") -> subprocess.Popen[str]:
    code = f"import sys; {prelude}from harness.cli.main import main; sys.exit(main())"
    cmd = [sys.executable, "-c", code, "eval", *TASKS, "--model", "gold", "--out", str(out),
           "--label", "harness.test=1", "--json", *extra]
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen[str], timeout: float = 400) -> tuple[int, dict[str, Any], str]:
    stdout, stderr = proc.communicate(timeout=timeout)
    return proc.returncode, (json.loads(stdout) if stdout.strip() else {}), stderr


def _kill_when_it_holds_a_container(cluster: LocalCluster, node: RayNode, docker_client: Any,
                                    killed: list[str]) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        pids = {str(p) for p in _tree(node.process.pid)}
        for container in docker_client.api.containers(filters={"label": "harness.test=1"}):
            owner = (container.get("Labels") or {}).get("harness.pid")
            if owner in pids:
                cluster.kill_node(node)
                killed.append(owner)
                return
        time.sleep(0.2)


def test_eval_on_ray_reruns_the_instance_of_a_killed_worker_and_matches_the_local_verdicts(
        ray_cluster: LocalCluster, ray_worker: RayNode, docker_client: Any, tmp_path: Path) -> None:
    rc, local, err = _finish(_eval(tmp_path / "local"))      # also builds the environment images once
    assert rc == 0, err
    killed: list[str] = []
    watcher = threading.Thread(target=_kill_when_it_holds_a_container,
                               args=(ray_cluster, ray_worker, docker_client, killed))
    watcher.start()
    rc, on_ray, err = _finish(_eval(tmp_path / "ray", "--backend", "ray", "--ray-address", ray_cluster.address))
    watcher.join()
    assert rc == 0, err
    assert killed, "the worker node never ran an instance"
    verdicts = {i: r["status"] for i, r in on_ray["instances"].items()}
    assert verdicts == {i: r["status"] for i, r in local["instances"].items()}
    assert set(verdicts.values()) == {"resolved"}
    assert on_ray["resolved_ids"] == local["resolved_ids"] and on_ray["error_ids"] == []
    retries = {i: r["infra_retries"] for i, r in on_ray["instances"].items()}
    assert sorted(retries.values()) == [0, 0, 0, 1]
    retried = next(i for i, n in retries.items() if n)
    done = json.loads((tmp_path / "ray" / "instances" / retried / "done").read_text())
    assert done["infra_retries"] == 1 and done["status"] == "resolved"
    for name in ("trajectory.jsonl", "patch.diff", "result.json", "test_output.txt", "report.json"):
        assert (tmp_path / "ray" / "instances" / retried / name).is_file(), name
    left = docker_client.api.containers(all=True, filters={"label": f"harness.pid={killed[0]}"})
    assert left == [], "the killed worker's containers were not reaped"
    predictions = (tmp_path / "ray" / "predictions.jsonl").read_text().splitlines()
    assert sorted(json.loads(p)["instance_id"] for p in predictions) == sorted(verdicts)


def test_resume_on_ray_reruns_only_the_unfinished_instance(ray_cluster: LocalCluster, ray_worker: RayNode,
                                                           tmp_path: Path) -> None:
    out = tmp_path / "run"
    rc, first, err = _finish(_eval(out, "--backend", "ray", "--ray-address", ray_cluster.address))
    assert rc == 0, err
    (out / "instances" / "pagination" / "done").unlink()
    before = {p.parent.name: p.stat().st_mtime_ns for p in (out / "instances").glob("*/done")}
    rc, second, err = _finish(_eval(out, "--resume", "--backend", "ray", "--ray-address", ray_cluster.address))
    assert rc == 0, err
    assert "resuming: 3 instance(s) already finished, 1 to run" in err
    assert {p.parent.name: p.stat().st_mtime_ns for p in (out / "instances").glob("*/done")
            if p.parent.name != "pagination"} == before
    assert (out / "instances" / "pagination" / "done").is_file()
    strip = ("instances", "totals")
    assert {k: v for k, v in second.items() if k not in strip} == {k: v for k, v in first.items() if k not in strip}


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

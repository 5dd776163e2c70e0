"""Stop and resume of `harness eval --backend ray` on a real two-node Ray cluster (a head and a worker
node, one instance each at a time) with the shipped tasks and --model gold, the driver a real
`harness eval` process sent SIGINT or SIGTERM: the first signal lets the running instances finish and
starts no other, the second cancels them; either way no container of the run is left and no Ray
worker that held one lives on, and `--resume` gives the uninterrupted run's report without grading
any instance twice. Also: a Ray worker process SIGKILLed mid-instance takes its containers along by
itself (their lifeline), before any reaper runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import docker
import pytest

from harness.evaluation.ray_cluster import LocalCluster, RayNode, marked_pids
from tests.ray.test_ray_eval import TASKS, _eval, _finish

COUNTS = ("total_instances", "completed_instances", "resolved_instances", "unresolved_instances",
          "error_instances", "incomplete_instances")
ID_LISTS = ("submitted_ids", "completed_ids", "resolved_ids", "unresolved_ids", "error_ids", "incomplete_ids")


def verdicts(report: dict[str, Any]) -> dict[str, Any]:
    """What a resumed run must give as an uninterrupted one does: counts, id lists, statuses (no times)."""
    return {"counts": {k: report[k] for k in COUNTS}, "ids": {k: report[k] for k in ID_LISTS},
            "status": {i: row["status"] for i, row in report["instances"].items()}}


def stamps(out: Path) -> dict[str, tuple[int, int]]:
    """Each finished instance's `done` marker, by inode and mtime: a regraded instance rewrites it."""
    return {p.parent.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (out / "instances").glob("*/done")}


@pytest.fixture(scope="module")
def uninterrupted(ray_cluster: LocalCluster, ray_worker_for_module: RayNode,
                  tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The report of an uninterrupted run on the cluster (also builds the environment images once)."""
    rc, report, err = _finish(_eval(tmp_path_factory.mktemp("whole") / "out", "--backend", "ray",
                                    "--ray-address", ray_cluster.address))
    assert rc == 0, err
    assert set(verdicts(report)["status"].values()) == {"resolved"}
    return report


def _owners_once_running(proc: subprocess.Popen[str], client: docker.DockerClient, mark: str,
                         cluster: LocalCluster) -> set[int]:
    """Wait until a Ray worker of `cluster` runs a container labelled `mark`; the pids of such workers."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        workers = marked_pids(cluster.id)
        owners = {int(c["Labels"]["harness.pid"]) for c in client.api.containers(filters={"label": mark})}
        if owners & workers:
            return owners & workers
        time.sleep(0.1)
    pytest.fail(f"no Ray worker ran a container of the run (exit {proc.poll()})")


def _assert_nothing_left(client: docker.DockerClient, mark: str, owners: set[int]) -> None:
    assert client.api.containers(all=True, filters={"label": mark}) == [], "a container of the run is left"
    time.sleep(1.0)
    alive = {pid for pid in owners if Path(f"/proc/{pid}").exists()
             and client.api.containers(all=True, filters={"label": f"harness.pid={pid}"})}
    assert alive == set(), "a Ray worker still holds a container of the run"


def _resume_and_compare(out: Path, cluster: LocalCluster, mark: str, uninterrupted: dict[str, Any],
                        client: docker.DockerClient) -> None:
    before = stamps(out)
    assert len(before) < len(TASKS), "every instance finished before the stop: nothing left to resume"
    rc, resumed, err = _finish(_eval(out, "--resume", "--backend", "ray", "--ray-address", cluster.address,
                                     "--label", mark))
    assert rc == 0, err
    if before:     # said only when something was finished
        assert f"resuming: {len(before)} instance(s) already finished, {len(TASKS) - len(before)} to run" in err
    assert verdicts(resumed) == verdicts(uninterrupted)
    after = stamps(out)
    assert {i: after[i] for i in before} == before, "an instance finished before the stop was graded again"
    assert client.api.containers(all=True, filters={"label": mark}) == []


def test_one_sigint_lets_the_running_instances_finish_and_resume_gives_the_uninterrupted_report(
        uninterrupted: dict[str, Any], ray_cluster: LocalCluster, ray_worker: RayNode,
        docker_client: docker.DockerClient, tmp_path: Path) -> None:
    mark, out = f"harness.raytest={uuid.uuid4().hex[:8]}", tmp_path / "out"
    proc = _eval(out, "--backend", "ray", "--ray-address", ray_cluster.address, "--label", mark)
    owners = _owners_once_running(proc, docker_client, mark, ray_cluster)
    proc.send_signal(signal.SIGINT)
    rc, _, err = _finish(proc, timeout=600)
    assert rc == 130, err
    assert "stopping: " in err and "instance(s) will not start; waiting for the" in err
    assert "stopped: the running instances finished" in err
    assert "cancelled" not in err
    finished = stamps(out)
    assert finished, "the instances running at the stop were not let finish"
    for iid in finished:
        assert json.loads((out / "instances" / iid / "done").read_text())["status"] == "resolved"
    _assert_nothing_left(docker_client, mark, owners)
    _resume_and_compare(out, ray_cluster, mark, uninterrupted, docker_client)


def test_a_second_sigterm_cancels_the_running_instances_and_resume_reruns_them(
        uninterrupted: dict[str, Any], ray_cluster: LocalCluster, ray_worker: RayNode,
        docker_client: docker.DockerClient, tmp_path: Path) -> None:
    mark, out = f"harness.raytest={uuid.uuid4().hex[:8]}", tmp_path / "out"
    proc = _eval(out, "--backend", "ray", "--ray-address", ray_cluster.address, "--label", mark)
    owners = _owners_once_running(proc, docker_client, mark, ray_cluster)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    rc, _, err = _finish(proc, timeout=300)
    assert rc == 130, err
    assert "stopped: the run's Ray tasks were cancelled and their containers removed" in err
    _assert_nothing_left(docker_client, mark, owners)
    dead = {pid for pid in owners if not Path(f"/proc/{pid}").exists()}
    assert dead == owners, "a cancelled instance's Ray worker lives on"
    _resume_and_compare(out, ray_cluster, mark, uninterrupted, docker_client)


def _departure(client: docker.DockerClient, container_id: str, since: float) -> list[str]:
    """The daemon's events for the container since `since`, up to its `destroy` (or 10 s)."""
    seen: list[str] = []
    for event in client.events(since=int(since) - 1, until=int(time.time()) + 10, decode=True,
                               filters={"container": container_id}):
        seen.append(str(event.get("status") or event.get("Action")))
        if seen[-1] == "destroy":
            break
    return seen


def test_a_ray_worker_killed_mid_instance_takes_its_containers_along_by_itself(
        ray_cluster: LocalCluster, ray_worker: RayNode, docker_client: docker.DockerClient, tmp_path: Path) -> None:
    mark = f"harness.raytest={uuid.uuid4().hex[:8]}"
    proc = _eval(tmp_path / "out", "--backend", "ray", "--ray-address", ray_cluster.address, "--label", mark)
    try:
        worker = min(_owners_once_running(proc, docker_client, mark, ray_cluster))
        held = [c["Id"] for c in docker_client.api.containers(filters={"label": f"harness.pid={worker}"})]
        killed = time.time()
        os.kill(worker, signal.SIGKILL)
        for container in held:
            events = _departure(docker_client, container, killed)
            assert "die" in events and "destroy" in events, (container, events)
            # the lifeline's own end: the container dies by itself, no reaper's removal (`kill`) first
            assert "kill" not in events[:events.index("die")], (container, events)
        assert docker_client.api.containers(all=True, filters={"label": f"harness.pid={worker}"}) == []
        rc, report, err = _finish(proc)
        assert rc == 0, err
        assert sorted(r["infra_retries"] for r in report["instances"].values()) == [0] * (len(TASKS) - 1) + [1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

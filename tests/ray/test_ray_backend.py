"""run_on_ray on a real two-node Ray cluster (head + one worker process): streaming, placement,
a node lost mid-item, infrastructure retries, reaping, and the refusals with their messages."""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import ray.cloudpickle

from harness.errors import ConfigError
from harness.evaluation.options import Cancelling, StopRequest
from harness.evaluation.ray_backend import Outcome, import_ray, run_on_ray
from harness.evaluation.ray_cluster import LocalCluster, RayNode, _tree
from harness.evaluation.ray_resources import TaskResources, check_capacity, parse_size
from sandbox.api import Limits, SandboxSpec
from sandbox.docker_sandbox import DockerSandbox
from sandbox.errors import DockerUnavailable

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])   # the jobs below run on the nodes
SMALL = TaskResources(cpus=1.0, memory=512 * 1024 ** 2)


def sleepy(item: tuple[str, float]) -> dict[str, Any]:
    name, seconds = item
    time.sleep(seconds)
    return {"name": name, "pid": os.getpid()}


def holds_a_sandbox(item: tuple[str, str, str]) -> str:
    """Start a sandbox, note this process's pid in `marks`, and keep the sandbox for a while."""
    name, image, marks = item
    spec = SandboxSpec(image=image, session=f"raytest-{name}-{uuid.uuid4().hex[:6]}", labels={"harness.test": "1"})
    with DockerSandbox(spec):
        (Path(marks) / f"{name}.{os.getpid()}").write_text("")
        time.sleep(8)
    return name


def sleeps_marked(item: tuple[str, float, str]) -> str:
    """Say it started (a file in `marks`), then sleep."""
    name, seconds, marks = item
    (Path(marks) / name).write_text("")
    time.sleep(seconds)
    return name


def fails_with(kind: str) -> None:
    raise DockerUnavailable("no daemon on this node") if kind == "docker" else ValueError("a bug in the job")


def _run(job: Any, items: list[Any], cluster: LocalCluster, max_retries: int = 1,
         resources: TaskResources = SMALL) -> list[tuple[float, Outcome[Any, Any]]]:
    arrivals: list[tuple[float, Outcome[Any, Any]]] = []
    started = time.monotonic()
    run_on_ray(job, items, address=cluster.address, resources_per_item=resources, max_retries=max_retries,
               on_result=lambda o: arrivals.append((time.monotonic() - started, o)))
    return arrivals


def test_results_arrive_as_each_item_finishes_and_items_spread_over_both_nodes(
        ray_cluster: LocalCluster, ray_worker: RayNode) -> None:
    arrivals = _run(sleepy, [("slow", 6.0), ("quick-1", 0.2), ("quick-2", 0.2)], ray_cluster)
    names = [o.result["name"] for _, o in arrivals]
    assert sorted(names) == ["quick-1", "quick-2", "slow"]
    assert names[-1] == "slow"
    assert arrivals[-1][0] - arrivals[0][0] > 3.0          # the quick ones were handed over before
    assert all(o.infra_retries == 0 and o.error is None for _, o in arrivals)
    nodes = {o.attempts[-1].node_id for _, o in arrivals}
    assert len(nodes) == 2                                   # one CPU per node: both were used


def test_a_node_lost_mid_item_reruns_it_elsewhere_counted_as_infra_retry_and_its_container_reaped(
        ray_cluster: LocalCluster, ray_worker: RayNode, sandbox_image: str, docker_client: Any,
        tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    killed: list[int] = []

    def kill_worker_once_it_holds_a_sandbox() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            worker_pids = _tree(ray_worker.process.pid)
            for mark in marks.iterdir():
                pid = int(mark.suffix[1:])
                if pid in worker_pids:
                    ray_cluster.kill_node(ray_worker)
                    killed.append(pid)
                    return
            time.sleep(0.2)

    watcher = threading.Thread(target=kill_worker_once_it_holds_a_sandbox)
    watcher.start()
    arrivals = _run(holds_a_sandbox, [("a", sandbox_image, str(marks)), ("b", sandbox_image, str(marks))],
                    ray_cluster, max_retries=2)
    watcher.join()
    assert killed, "the worker node never ran an item"
    outcomes = {o.item[0]: o for _, o in arrivals}
    assert {name: o.result for name, o in outcomes.items()} == {"a": "a", "b": "b"}
    retried = [o for o in outcomes.values() if o.infra_retries]
    assert len(retried) == 1 and retried[0].infra_retries == 1
    lost, rerun = retried[0].attempts
    assert lost.pid == killed[0] and rerun.node_id != lost.node_id
    # the rerun reaps the lost attempt's container (`reaped` names it, unless another harness process
    # on this machine reaped it first: every one reaps dead owners' containers at its first sandbox)
    left = docker_client.containers.list(all=True, filters={"label": f"harness.pid={killed[0]}"})
    assert left == []


def test_an_infrastructure_error_is_retried_then_reported_but_a_job_bug_is_not_retried(
        ray_cluster: LocalCluster) -> None:
    arrivals = _run(fails_with, ["docker", "bug"], ray_cluster, max_retries=1)
    outcomes = {o.item: o for _, o in arrivals}
    docker = outcomes["docker"]
    assert docker.result is None and len(docker.attempts) == 2 and docker.infra_retries == 1
    assert docker.error == "DockerUnavailable: no daemon on this node (after 2 attempt(s))"
    bug = outcomes["bug"]
    assert bug.result is None and len(bug.attempts) == 1
    assert bug.error == "ValueError: a bug in the job (after 1 attempt(s))"


def test_an_instance_no_node_can_hold_is_refused_before_anything_runs(ray_cluster: LocalCluster) -> None:
    huge = TaskResources(cpus=1.0, memory=64 * 1024 ** 3)
    seen: list[Any] = []
    with pytest.raises(ConfigError) as info:
        run_on_ray(sleepy, [("x", 0.0)], address=ray_cluster.address, resources_per_item=huge, max_retries=0,
                   on_result=seen.append)
    assert str(info.value).startswith("no Docker node of the Ray cluster can hold one instance, which needs "
                                      "1 CPU and 64.00 GiB of memory")
    assert "Lower sandbox.limits (cpus, memory) or start larger nodes" in str(info.value)
    assert seen == []


class _Nodes:
    """Stands in for Ray's node table in a capacity check (Ray's own data, not our code)."""

    def __init__(self, *resources: dict[str, float]) -> None:
        self._nodes = [{"Alive": True, "Resources": r} for r in resources]

    def nodes(self) -> list[dict[str, Any]]:
        return self._nodes


def test_a_cluster_without_docker_nodes_is_refused_with_how_to_start_one() -> None:
    need = TaskResources(cpus=1.0, memory=1024 ** 3)
    with pytest.raises(ConfigError) as info:
        check_capacity(_Nodes({"CPU": 8.0, "memory": 32.0 * 1024 ** 3}), need)   # type: ignore[arg-type]
    assert str(info.value) == ("no node of the Ray cluster offers the resource 'docker' (1 live node(s)); start "
                               "each node that runs Docker with it, e.g. `ray start --address=HEAD:6379 "
                               "--resources='{\"docker\": 1}'`")
    check_capacity(_Nodes({"CPU": 8.0, "memory": 32.0 * 1024 ** 3, "docker": 1.0}), need)  # type: ignore[arg-type]


def test_resources_per_instance_derive_from_the_sandbox_limits() -> None:
    assert TaskResources.from_limits(Limits()) == TaskResources(cpus=1.0, memory=2 * 1024 ** 3 + 256 * 1024 ** 2)
    assert TaskResources.from_limits(Limits(cpus=0.5, memory="512m")).cpus == 0.5
    assert TaskResources.from_limits(Limits(cpus=1.5, memory="1g")).cpus == 2.0   # Ray: whole CPUs above one
    assert TaskResources.from_limits(Limits()).ray_options() == {
        "num_cpus": 1.0, "memory": 2 * 1024 ** 3 + 256 * 1024 ** 2, "resources": {"docker": 0.001}}
    assert [parse_size(s) for s in ("4096", "1k", "512m", "2g", "2gb")] == [4096, 1024, 512 * 1024 ** 2,
                                                                            2 * 1024 ** 3, 2 * 1024 ** 3]
    with pytest.raises(ConfigError) as info:
        parse_size("lots")
    assert str(info.value) == ("sandbox memory limit 'lots' is not a size; expected a number with an optional "
                               "unit b, k, m, g or t, e.g. \"2g\" or \"512m\"")


def test_import_ray_returns_ray_when_installed() -> None:
    assert import_ray() is ray


def _stop_once_started(marks: Path, count: int, stop: StopRequest, requests: int) -> threading.Thread:
    def watch() -> None:
        deadline = time.monotonic() + 120
        while len(list(marks.iterdir())) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        for _ in range(requests):
            stop.request()
    thread = threading.Thread(target=watch)
    thread.start()
    return thread


def test_a_drain_lets_the_started_items_end_and_starts_no_other(ray_cluster: LocalCluster, ray_worker: RayNode,
                                                                tmp_path: Path) -> None:
    items = [(f"item-{n}", 4.0, str(tmp_path)) for n in range(5)]
    stop = StopRequest()
    told: list[tuple[int, ...]] = []
    arrived: list[Outcome[Any, Any]] = []
    watcher = _stop_once_started(tmp_path, 2, stop, requests=1)
    run_on_ray(sleeps_marked, items, address=ray_cluster.address, resources_per_item=SMALL, max_retries=1,
               on_result=arrived.append, stop=stop, on_drain=lambda *counts: told.append(counts))
    watcher.join()
    started = sorted(p.name for p in tmp_path.iterdir())
    assert len(started) == 2                     # two nodes of one CPU: two items ran, the other three never did
    assert sorted(str(o.result) for o in arrived) == started
    assert all(o.error is None and o.infra_retries == 0 for o in arrived)
    assert told == [(3, 2)]


def test_a_second_stop_request_cancels_the_started_items(ray_cluster: LocalCluster, ray_worker: RayNode,
                                                         tmp_path: Path) -> None:
    items = [(f"item-{n}", 30.0, str(tmp_path)) for n in range(3)]
    stop = StopRequest()
    arrived: list[Outcome[Any, Any]] = []
    watcher = _stop_once_started(tmp_path, 2, stop, requests=2)
    started = time.monotonic()
    with pytest.raises(Cancelling):
        run_on_ray(sleeps_marked, items, address=ray_cluster.address, resources_per_item=SMALL, max_retries=1,
                   on_result=arrived.append, stop=stop)
    watcher.join()
    assert arrived == [] and time.monotonic() - started < 30

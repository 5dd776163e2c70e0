"""A real Ray cluster on this machine for the Ray backend's tests: a head node and one worker node,
each a separate `ray start` process tree (1 CPU, 3 GiB each: room for one default sandbox)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest

from harness.evaluation.ray_cluster import LocalCluster, RayNode

NODE_MEMORY = 3 * 1024 ** 3


def _require_ray() -> None:
    try:
        importlib.import_module("ray")
    except ImportError as exc:
        pytest.fail(f"these tests need Ray ({exc}); install it with `.venv/bin/pip install 'ray[default]'` "
                    "or `pip install -e '.[ray]'`", pytrace=False)


@pytest.fixture(scope="session")
def ray_cluster(docker_client) -> Iterator[LocalCluster]:  # type: ignore[no-untyped-def]
    """The head node; stopped at the end, with a check that none of its processes is left."""
    _require_ray()
    with LocalCluster(head_cpus=1, head_memory=NODE_MEMORY) as cluster:
        yield cluster


def live_worker(cluster: LocalCluster) -> RayNode:
    """A live worker node joined to the head (a new one when a test killed the previous one)."""
    for node in cluster.nodes[1:]:
        if node.process.poll() is None:
            return node
    return cluster.add_node(f"worker-{len(cluster.nodes)}", cpus=1, memory=NODE_MEMORY)


@pytest.fixture
def ray_worker(ray_cluster: LocalCluster) -> RayNode:
    return live_worker(ray_cluster)


@pytest.fixture(scope="module")
def ray_worker_for_module(ray_cluster: LocalCluster) -> RayNode:
    return live_worker(ray_cluster)

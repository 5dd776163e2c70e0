"""A Ray worker that dies (SIGKILL) takes the sandboxes it started along: the worker process is their owner,
as in `harness eval --backend ray`, where each instance's sandboxes start in the worker that runs it."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.sandbox.test_lifeline import status, wait_gone

REPO = Path(__file__).resolve().parents[2]


def _hold_a_sandbox(image: str, said: str) -> None:
    """The Ray task: start a sandbox, say its name and this worker's pid, and keep it."""
    import uuid  # noqa: PLC0415 - this runs in the Ray worker, pickled by value

    from sandbox.api import SandboxSpec  # noqa: PLC0415
    from sandbox.docker_sandbox import DockerSandbox  # noqa: PLC0415

    box = DockerSandbox(SandboxSpec(image=image, session=f"ray-{uuid.uuid4().hex[:8]}",
                                    labels={"harness.test": "1"}))
    box.start()
    Path(said).write_text(json.dumps({"name": box.container.name, "pid": os.getpid()}))
    time.sleep(600)


def test_a_ray_workers_death_ends_its_sandboxes(sandbox_image: str, docker_client: docker.DockerClient,
                                                tmp_path: Path) -> None:
    ray: Any = pytest.importorskip("ray")   # the `ray` extra
    said = tmp_path / "held.json"
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})   # the worker imports this module
    name = ""
    try:
        ref = ray.remote(max_retries=0)(_hold_a_sandbox).remote(sandbox_image, str(said))
        deadline = time.monotonic() + 120
        while not said.exists() or not said.read_text():
            assert time.monotonic() < deadline, "the Ray task did not start its sandbox"
            time.sleep(0.2)
        held = json.loads(said.read_text())
        name = held["name"]
        assert status(docker_client, name) == "running" and held["pid"] != os.getpid()
        os.kill(held["pid"], signal.SIGKILL)
        assert wait_gone(docker_client, [name]) == {name: "gone"}
        with pytest.raises(ray.exceptions.RayError):
            ray.get(ref, timeout=60)
    finally:
        ray.shutdown()
        if name:
            for container in docker_client.containers.list(all=True, filters={"name": name}):
                container.remove(force=True)

"""A sandbox ends with the process that owns it, however that process ends, without any reaper running;
a slow or stopped owner keeps it (`sandbox/deployment/lifeline.py`).

Each test runs a real owner process (tests/sandbox/owner_process.py) and kills it for real. No reaper
runs between the kill and the check: the owner's containers are looked up by name until they are
gone (a generous wait; the figure of how fast is bench/bench_reliability.py's). The positive control
is an owner started without its lifeline (what every harness did before), whose container survives
the same kill.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from sandbox.deployment.lifeline import IDLE_COMMAND
from sandbox.docker_sandbox import DockerSandbox
from tests.sandbox.conftest import make_spec, processes

OWNER = Path(__file__).with_name("owner_process.py")
GONE_WITHIN = 15.0   # seconds: a wait for the daemon, not a measure


class Owner:
    def __init__(self, image: str, mode: str) -> None:
        self.proc = subprocess.Popen([sys.executable, str(OWNER), image, mode], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the owner process died at start (exit {self.proc.wait(30)})"
        said: dict[str, Any] = json.loads(line)
        self.containers: list[str] = said["containers"]
        self.child: int = said["child"]

    def ask(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def kill(self, sig: int = signal.SIGKILL) -> None:
        os.kill(self.proc.pid, sig)


@pytest.fixture
def owners(docker_client: docker.DockerClient) -> Iterator[list[Owner]]:
    made: list[Owner] = []
    yield made
    for owner in made:
        if owner.proc.poll() is None:
            owner.proc.kill()
            owner.proc.wait(30)
        if owner.child:
            try:
                os.kill(owner.child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for name in owner.containers:
            for container in docker_client.containers.list(all=True, filters={"name": name}):
                container.remove(force=True)


def status(client: docker.DockerClient, name: str) -> str:
    try:
        return str(client.api.inspect_container(name)["State"]["Status"])
    except docker.errors.NotFound:
        return "gone"


def wait_gone(client: docker.DockerClient, names: list[str], timeout: float = GONE_WITHIN) -> dict[str, str]:
    """The status of each container once all are gone, or when `timeout` has passed."""
    deadline = time.monotonic() + timeout
    while True:
        states = {name: status(client, name) for name in names}
        if all(state == "gone" for state in states.values()) or time.monotonic() > deadline:
            return states
        time.sleep(0.1)


def test_a_sigkilled_owner_takes_its_sandbox_along_and_an_untied_one_stays(
        sandbox_image: str, docker_client: docker.DockerClient, owners: list[Owner]) -> None:
    tied, untied = Owner(sandbox_image, "box"), Owner(sandbox_image, "untied")
    owners += [tied, untied]
    assert tied.ask("exec") == "alive" and untied.ask("exec") == "alive"
    assert status(docker_client, tied.containers[0]) == "running"
    tied.kill()
    untied.kill()
    assert wait_gone(docker_client, tied.containers) == {tied.containers[0]: "gone"}
    # the positive control: without the lifeline (the code before it), the same kill leaves it running
    assert status(docker_client, untied.containers[0]) == "running"


@pytest.mark.parametrize("how", ["SIGTERM", "crash", "stdin closed"])
def test_an_owner_that_ends_any_other_way_takes_its_sandbox_along(
        how: str, sandbox_image: str, docker_client: docker.DockerClient, owners: list[Owner]) -> None:
    owner = Owner(sandbox_image, "box")
    owners.append(owner)
    assert owner.ask("exec") == "alive"
    if how == "SIGTERM":
        owner.kill(signal.SIGTERM)
    elif how == "crash":
        assert owner.proc.stdin is not None
        owner.proc.stdin.write("crash\n")
        owner.proc.stdin.flush()
    else:
        assert owner.proc.stdin is not None
        owner.proc.stdin.close()   # it leaves its loop and returns without closing anything
    assert owner.proc.wait(30) != 0 or how == "stdin closed"
    assert wait_gone(docker_client, owner.containers) == {owner.containers[0]: "gone"}


def test_a_stopped_owner_keeps_its_sandbox_and_uses_it_when_continued(
        sandbox_image: str, docker_client: docker.DockerClient, owners: list[Owner]) -> None:
    owner = Owner(sandbox_image, "box")
    owners.append(owner)
    owner.kill(signal.SIGSTOP)
    try:
        time.sleep(10)
        assert status(docker_client, owner.containers[0]) == "running"
    finally:
        owner.kill(signal.SIGCONT)
    assert owner.ask("exec") == "alive"
    assert owner.ask("close") == "closed"
    assert status(docker_client, owner.containers[0]) == "gone"


def test_a_pools_blanks_end_with_the_pools_owner(
        sandbox_image: str, docker_client: docker.DockerClient, owners: list[Owner]) -> None:
    owner = Owner(sandbox_image, "pool")
    owners.append(owner)
    assert len(owner.containers) == 2
    assert {status(docker_client, name) for name in owner.containers} == {"running"}
    owner.kill()
    assert set(wait_gone(docker_client, owner.containers).values()) == {"gone"}


def test_a_child_of_the_owner_does_not_hold_the_lifeline(
        sandbox_image: str, docker_client: docker.DockerClient, owners: list[Owner]) -> None:
    owner = Owner(sandbox_image, "child")   # its child was started with close_fds=False and outlives it
    owners.append(owner)
    owner.kill()
    assert wait_gone(docker_client, owner.containers) == {owner.containers[0]: "gone"}
    os.kill(owner.child, 0)   # the child still runs: the container went although it lives


def test_the_main_process_reads_the_lifeline_and_the_agent_cannot_reach_it(sandbox_image: str) -> None:
    with DockerSandbox(make_spec(sandbox_image)) as box:
        procs = processes(box)
        assert sorted(p.split()[1] for p in procs) == sorted(["docker-init", "python3", IDLE_COMMAND[0]]), procs
        # the lifeline's reader runs as nobody: the agent can neither signal it nor read its descriptors
        probe = box.exec("pid=$(pgrep -x cat); echo $pid; ls -l /proc/$pid/fd/ 2>&1; kill -9 $pid; echo kill=$?",
                         timeout=10)
        assert "Permission denied" in probe.stdout.text and "kill=1" in probe.stdout.text, probe.stdout.text
        assert box.exec("echo still", timeout=10).stdout.text == "still\n"
        assert box.deployment.alive()


def test_the_lifeline_outlasts_garbage_collection_and_the_clients_other_requests(
        sandbox_image: str, docker_client: docker.DockerClient) -> None:
    with DockerSandbox(make_spec(sandbox_image)) as box:
        assert box.deployment.lifeline is not None and box.deployment.lifeline.fileno() >= 0
        gc.collect()
        for _ in range(20):   # the attach's connection is never handed back to the client's pool
            assert box._client is not None and box._client.api.containers(filters={"id": box.container.id})
        time.sleep(1)
        assert box.exec("echo here", timeout=10).stdout.text == "here\n" and box.deployment.alive()
        name = box.container.name
    assert status(docker_client, name) == "gone"

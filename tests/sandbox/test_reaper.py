"""The reaper judges a container's owner by host, boot, pid and the pid's start time; `reap` removes exactly
the containers whose owner is gone, `reap --all` spares (and names) live owners' unless `--force`.

The containers here are real, idle (`sleep`), and carry made-up owner labels: a pid that is alive but
belongs to a process started at another time (a reused pid), an earlier boot, another host. Each
test's containers carry a session label of their own; `reap_all` is narrowed to it (`only`), so a
test never removes another run's sandboxes.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from sandbox.reaper import boot_id, owner_alive, owner_labels, process_start, reap, reap_all

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def live_process() -> Iterator[subprocess.Popen[bytes]]:
    """A live process to stand for an owner (its pid and start time are real)."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait(10)


class Maker:
    """Makes idle containers of one session with this process's owner labels, overridden by `owner`."""

    def __init__(self, image: str, client: docker.DockerClient) -> None:
        self.image, self.client = image, client
        self.session = f"reaptest-{uuid.uuid4().hex[:8]}"
        self.made: list[str] = []

    def __call__(self, **owner: str) -> str:
        labels = {**owner_labels(self.session), "harness.kind": "sandbox", "harness.test": "1", **owner}
        container = self.client.containers.run(self.image, ["sleep", "infinity"], detach=True, labels=labels,
                                               network_mode="none", name=f"harness-{self.session}-{len(self.made)}")
        self.made.append(str(container.name))
        return str(container.name)


@pytest.fixture
def make_container(sandbox_image: str, docker_client: docker.DockerClient) -> Iterator[Maker]:
    maker = Maker(sandbox_image, docker_client)
    yield maker
    for name in maker.made:
        try:
            docker_client.api.remove_container(name, force=True)
        except docker.errors.NotFound:
            pass


def exists(client: docker.DockerClient, name: str) -> bool:
    try:
        client.api.inspect_container(name)
        return True
    except docker.errors.NotFound:
        return False


def test_the_owner_labels_name_this_process_by_pid_start_time_and_boot() -> None:
    labels = owner_labels("s")
    assert labels["harness.pid"] == str(os.getpid())
    assert labels["harness.pid_start"] == process_start(os.getpid()) != ""
    assert labels["harness.boot"] == boot_id() == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert owner_alive(labels)   # positive control: this very process is alive


def test_a_reused_pid_an_earlier_boot_and_a_dead_pid_are_gone_owners_and_reap_removes_exactly_those(
        make_container: Maker, docker_client: docker.DockerClient, live_process: subprocess.Popen[bytes]) -> None:
    pid = str(live_process.pid)
    start = process_start(live_process.pid)
    other_start = str(int(start) - 1000)
    make = make_container
    live = make(**{"harness.pid": pid, "harness.pid_start": start})                     # its owner runs
    reused = make(**{"harness.pid": pid, "harness.pid_start": other_start})             # another process has the pid
    rebooted = make(**{"harness.pid": pid, "harness.pid_start": start, "harness.boot": "an-earlier-boot"})
    dead = make(**{"harness.pid": "999999999", "harness.pid_start": start})
    elsewhere = make(**{"harness.pid": "999999999", "harness.host": "another-machine"})
    older = make(**{"harness.pid": pid, "harness.pid_start": "", "harness.boot": ""})   # an older harness's labels
    removed = reap(docker_client)
    # removed here, or a moment earlier by another harness process's first sandbox start on this machine
    # (the same reaper, judging the same labels): what counts is which are left
    assert not {live, elsewhere, older} & set(removed)
    assert [exists(docker_client, n) for n in (live, reused, rebooted, dead, elsewhere, older)] == \
        [True, False, False, False, True, True]


def test_reap_all_spares_live_owners_and_names_them_and_force_removes_them(
        make_container: Maker, docker_client: docker.DockerClient, live_process: subprocess.Popen[bytes]) -> None:
    make = make_container
    only = (f"harness.session={make.session}",)
    mine = make()                                                       # this process: alive
    theirs = make(**{"harness.pid": str(live_process.pid), "harness.pid_start": process_start(live_process.pid)})
    reused = make(**{"harness.pid": str(live_process.pid), "harness.pid_start": "1"})
    elsewhere = make(**{"harness.host": "another-machine"})
    result = reap_all(docker_client, only=only)
    assert sorted(result.removed) == sorted([reused, elsewhere])
    spared = {s.pid: s for s in result.spared}
    assert set(spared) == {os.getpid(), live_process.pid}
    assert spared[live_process.pid].containers == (theirs,) and spared[live_process.pid].command == "sleep 300"
    assert spared[os.getpid()].containers == (mine,) and "pytest" in spared[os.getpid()].command
    assert exists(docker_client, mine) and exists(docker_client, theirs)
    forced = reap_all(docker_client, force=True, only=only)
    assert sorted(forced.removed) == sorted([mine, theirs]) and forced.spared == []
    assert not exists(docker_client, mine) and not exists(docker_client, theirs)


def test_the_cli_says_what_reap_all_spared_and_refuses_force_without_all(
        make_container: Maker, docker_client: docker.DockerClient, live_process: subprocess.Popen[bytes]) -> None:
    make = make_container
    theirs = make(**{"harness.pid": str(live_process.pid), "harness.pid_start": process_start(live_process.pid)})
    harness = str(REPO / ".venv" / "bin" / "harness")
    said = subprocess.run([harness, "sandbox", "reap", "--all"], capture_output=True, text=True, timeout=120)
    assert said.returncode == 0, said.stderr
    assert "spared" in said.stdout and f"pid {live_process.pid} (sleep 300): " in said.stdout, said.stdout
    assert theirs in said.stdout and exists(docker_client, theirs)
    as_json = subprocess.run([harness, "sandbox", "reap", "--all", "--json"], capture_output=True, text=True,
                             timeout=120)
    spared = {s["pid"]: s for s in json.loads(as_json.stdout)["spared"]}
    assert spared[live_process.pid]["containers"] == [theirs]
    refused = subprocess.run([harness, "sandbox", "reap", "--force"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "--force goes with --all" in refused.stderr
    assert exists(docker_client, theirs)

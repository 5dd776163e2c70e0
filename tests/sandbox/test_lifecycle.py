"""The channel's death is reported and repaired; a crashed harness leaves nothing after the reaper."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import docker
import docker.errors
import pytest

from harness.config import ToolsConfig
from harness.errors import ToolError
from harness.tools.base import Observation, ToolContext
from harness.tools.shell.bash import bash_tool
from sandbox.api import SandboxSpec
from sandbox.docker_sandbox import DockerSandbox
from sandbox.errors import ChannelClosed, ImageError, SandboxError, SandboxUnavailable
from sandbox.reaper import reap
from tests.sandbox.conftest import make_spec, processes

REPO = Path(__file__).resolve().parents[2]


def test_channel_death_is_reported_and_restart_channel_recovers(sandbox: DockerSandbox) -> None:
    sandbox.exec("echo keep > kept.txt", timeout=10)
    with pytest.raises(ChannelClosed, match="the exec channel closed"):
        sandbox.exec("kill -9 $PPID; sleep 5", timeout=20)
    with pytest.raises(ChannelClosed):
        sandbox.exec("echo again", timeout=10)
    sandbox.restart_channel()
    assert sandbox.exec("cat kept.txt", timeout=10).stdout.text == "keep\n"
    procs = processes(sandbox)                                 # the old command's `sleep 5` is gone too
    assert sorted(p.split()[1] for p in procs) == ["cat", "docker-init", "python3"], procs


def test_the_bash_tool_turns_channel_death_into_an_error_observation_and_restarts(sandbox: DockerSandbox) -> None:
    tool = bash_tool(ToolsConfig())
    ctx = ToolContext(sandbox=sandbox, session=sandbox.session)
    with pytest.raises(ToolError, match="the sandbox's command channel died while running 'kill -9 \\$PPID'.*"
                                        "it has been restarted"):
        tool.function(ctx, command="kill -9 $PPID")
    again = tool.function(ctx, command="echo back")
    assert isinstance(again, Observation) and again.text.endswith("back") and again.details["exit_code"] == 0


def test_a_stopped_container_is_reported_as_unavailable_not_as_a_closed_channel(sandbox: DockerSandbox) -> None:
    sandbox.container.kill()
    with pytest.raises(SandboxUnavailable, match="killed from outside"):
        sandbox.exec("true", timeout=10)


def test_close_removes_the_container_and_is_idempotent(sandbox_image: str, docker_client: docker.DockerClient) -> None:
    box = DockerSandbox(make_spec(sandbox_image))
    box.start()
    name = box.container.name
    box.close()
    box.close()
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(name)
    with pytest.raises(ChannelClosed, match="restart_channel"):
        box.exec("true")


def test_a_missing_image_is_reported_with_the_build_command() -> None:
    with pytest.raises(ImageError, match="harness sandbox build"):
        with DockerSandbox(make_spec("harness-sandbox:does-not-exist")):
            pass


CRASHING_HARNESS = """
import sys, time, uuid
sys.path.insert(0, {repo!r})
from sandbox.api import SandboxSpec
from sandbox.docker_sandbox import DockerSandbox
box = DockerSandbox(SandboxSpec(image={image!r}, session="crash-" + uuid.uuid4().hex[:6],
                                labels={{"harness.test": "1"}}))
box.deployment.tied = False   # as an older harness started it: no lifeline, only the reaper removes it
box.start()
print(box.container.name, flush=True)
time.sleep(600)
"""


def test_a_container_without_lifeline_left_by_a_sigkilled_harness_is_removed_by_the_reaper(
        sandbox: DockerSandbox, sandbox_image: str, docker_client: docker.DockerClient) -> None:
    code = textwrap.dedent(CRASHING_HARNESS.format(repo=str(REPO), image=sandbox_image))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    name = ""
    try:
        assert proc.stdout is not None
        name = proc.stdout.readline().strip()
        assert name.startswith("harness-crash-")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert docker_client.containers.get(name).status == "running"     # the crash left it behind
        removed = subprocess.run([str(REPO / ".venv/bin/harness"), "sandbox", "reap", "--json"],
                                 capture_output=True, text=True, timeout=120, cwd=REPO)
        assert removed.returncode == 0, removed.stderr
        # Another test run on this machine may reap it a moment earlier: its reaper is the same code.
        assert name in json.loads(removed.stdout) or not docker_client.containers.list(
            all=True, filters={"name": name})
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(name)
        assert sandbox.exec("echo alive", timeout=10).stdout.text == "alive\n"   # a live run's box is kept
    finally:
        if proc.poll() is None:
            proc.kill()
        if name:
            for c in docker_client.containers.list(all=True, filters={"name": name}):
                c.remove(force=True)


def test_reap_keeps_containers_whose_harness_is_alive(sandbox: DockerSandbox) -> None:
    assert sandbox.container.name not in reap(sandbox._client)
    sandbox.container.reload()
    assert sandbox.container.status == "running"


def test_start_up_time_is_reasonable(sandbox_image: str) -> None:
    started = time.monotonic()
    with DockerSandbox(make_spec(sandbox_image)) as box:
        assert box.exec("true", timeout=10).exit_code == 0
    assert time.monotonic() - started < 30   # a sanity bound only; bench/bench_sandbox.py measures it


def test_a_stopped_channel_times_out_and_restart_replaces_it(sandbox: DockerSandbox) -> None:
    assert sandbox._channel is not None
    old_pid = sandbox._channel.server_pid
    with pytest.raises(ChannelClosed, match="the exec channel stopped answering"):
        sandbox._channel.request({"op": "exec", "command": "kill -STOP $PPID", "timeout": 10}, timeout=3)
    with pytest.raises(ChannelClosed, match="failed earlier .* call restart_channel"):
        sandbox.exec("echo not on a channel that timed out", timeout=10)
    sandbox.restart_channel()
    procs = processes(sandbox)
    assert sorted(p.split()[1] for p in procs) == ["cat", "docker-init", "python3"], procs
    assert str(old_pid) not in [p.split()[0] for p in procs]
    assert sandbox.exec("echo back", timeout=10).stdout.text == "back\n"


def test_a_late_answer_is_never_taken_for_the_next_commands(sandbox: DockerSandbox) -> None:
    assert sandbox._channel is not None
    with pytest.raises(ChannelClosed, match="stopped answering"):
        sandbox._channel.request({"op": "exec", "command": "sleep 1; echo late", "timeout": 10}, timeout=0.3)
    time.sleep(1.5)                                     # the late answer is now waiting on the socket
    with pytest.raises(ChannelClosed, match="failed earlier"):
        sandbox.exec("echo next", timeout=10)
    sandbox.restart_channel()
    assert sandbox.exec("echo next", timeout=10).stdout.text == "next\n"


def test_with_over_an_already_started_sandbox_makes_no_second_container(sandbox_image: str, docker_client) -> None:
    box = DockerSandbox(SandboxSpec(image=sandbox_image, session="twice", labels={"harness.test": "1"}))
    box.start()
    with box:
        with pytest.raises(SandboxError, match="already started"):
            box.start()
        mine = docker_client.containers.list(all=True, filters={"label": "harness.session=twice"})
        assert [c.id for c in mine] == [box.container.id]
    assert docker_client.containers.list(all=True, filters={"label": "harness.session=twice"}) == []

"""A sandbox whose container dies mid-command (killed from outside, after an OOM) is an error of its own
kind: `SandboxUnavailable` with Docker's reason, no channel restarted against it, and a session that
ends with the stop reason `sandbox_unavailable` after one model call (no retry loop).

The positive controls: the same command answers before the kill; a command the memory limit kills is
an ordinary result (exit 137), not a dead sandbox, since the container lives on.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from harness.agent.loop import AgentLoop
from harness.agent.session import run_session
from harness.config import Config
from harness.core.task import load_task
from harness.messages import system, user
from harness.models.scripted import ScriptedModel
from harness.tools.base import ToolContext
from harness.tools.catalog import default_catalog
from sandbox.api import Limits
from sandbox.docker_sandbox import DockerSandbox
from sandbox.errors import SandboxUnavailable
from tests.sandbox.conftest import make_spec
from tests.sandbox.test_lifeline import status

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_box(sandbox_image: str) -> Iterator[DockerSandbox]:
    with DockerSandbox(make_spec(sandbox_image, limits=Limits(memory="256m"))) as box:
        yield box


def kill_soon(box: DockerSandbox, after: float = 1.5) -> threading.Thread:
    """Kill the container from outside (as `docker kill` does) while a command runs."""
    assert box._client is not None
    api, ident = box._client.api, box.container.id
    thread = threading.Thread(target=lambda: (time.sleep(after), api.kill(ident)), daemon=True)
    thread.start()
    return thread


def test_a_container_killed_mid_command_is_unavailable_with_dockers_reason_and_is_not_restarted(
        small_box: DockerSandbox) -> None:
    name = small_box.container.name
    assert small_box.exec("echo up", timeout=10).stdout.text == "up\n"          # positive control
    hog = small_box.exec("python3 -c 'x = bytearray(10**9)'", timeout=60)
    assert hog.exit_code == 137, hog             # the memory limit killed the command; the container lives
    assert small_box.exec("echo still up", timeout=10).stdout.text == "still up\n"
    kill_soon(small_box).join(0)
    with pytest.raises(SandboxUnavailable) as caught:
        small_box.exec("sleep 30", timeout=60)
    reason = caught.value.reason
    assert "OOMKilled" in reason and "killed from outside (signal" in reason and "exit code 137" in reason, reason
    with pytest.raises(SandboxUnavailable):
        small_box.restart_channel()              # no new channel against a dead container
    with pytest.raises(SandboxUnavailable):
        small_box.read_file("/workspace/anything")
    assert status(small_box._client, name) == "gone"   # type: ignore[arg-type]


def test_a_dead_sandbox_ends_the_session_with_its_own_stop_reason_after_one_model_call(
        sandbox_image: str) -> None:
    turns = [[{"type": "tool_use", "id": "c1", "name": "bash", "input": {"command": "sleep 30"}}],
             [{"type": "tool_use", "id": "c2", "name": "bash", "input": {"command": "echo again"}}],
             [{"type": "text", "text": "done"}]]
    model = ScriptedModel(turns)
    config = Config()
    with DockerSandbox(make_spec(sandbox_image)) as box:
        ctx = ToolContext(sandbox=box, session=box.session)
        kill_soon(box, after=2.0)
        result = AgentLoop(model, default_catalog(config), ctx, config).run(
            [system("You fix code."), user("Run the tests.")])
    assert result.stop_reason == "sandbox_unavailable", result
    assert "no longer running" in result.final_text and "killed from outside" in result.final_text
    answered = [r for m in result.messages for r in m.tool_results]
    assert [(r.is_error, r.error_kind) for r in answered] == [(True, "sandbox_unavailable")]
    assert result.turns == 1                      # the model was asked once: nothing retried the dead sandbox


def test_a_session_whose_sandbox_dies_records_it_and_raises_it_for_the_evaluation(
        sandbox_image: str, tmp_path: Path, docker_client: docker.DockerClient) -> None:
    # harness eval records an instance whose session raised as an infrastructure error ("error", the reason)
    task = load_task(REPO / "tasks" / "wordcount")
    model = ScriptedModel([[{"type": "tool_use", "id": "c1", "name": "bash", "input": {"command": "sleep 60"}}],
                           [{"type": "text", "text": "done"}]])
    selector = {"label": ["harness.kind=session", f"harness.pid={os.getpid()}", "harness.test=1"]}

    def kill_the_session_box() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = docker_client.api.containers(filters=selector)
            if found:
                time.sleep(3)   # the model's `sleep 60` is running by now
                docker_client.api.kill(found[0]["Id"])
                return
            time.sleep(0.1)

    threading.Thread(target=kill_the_session_box, daemon=True).start()
    with pytest.raises(SandboxUnavailable, match="killed from outside"):
        run_session(task, model, Config(), tmp_path / "run", image=sandbox_image, labels={"harness.test": "1"})
    trajectory = (tmp_path / "run" / "trajectory.jsonl").read_text()
    assert '"error_kind": "sandbox_unavailable"' in trajectory and "killed from outside" in trajectory
    result = json.loads((tmp_path / "run" / "result.json").read_text())   # the run folder is whole
    assert result["stop_reason"] == "sandbox_unavailable" and result["tests_passed"] is None, result
    assert "killed from outside" in result["final_text"]
    assert (tmp_path / "run" / "patch.diff").read_text() == ""

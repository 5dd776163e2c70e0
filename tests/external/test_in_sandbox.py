"""The agent images in a real hardened sandbox (read-only root, user agent, no network): the agents start,
leave the project's `python` alone, see the project at /testbed, and run a whole task against a scripted
gateway on the sandbox's loopback (`fake_gateway.py`, run inside by the image's /usr/bin/python3).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.external import AgentRequest, command_line, ensure_agent_image, parse_agent, write_files
from harness.external.commands import AIDER_CHAT_HISTORY, MINI_TRAJECTORY
from sandbox.api import ExecResult, SandboxSpec
from sandbox.docker_sandbox import DockerSandbox

pytestmark = [pytest.mark.docker, pytest.mark.slow]
PORT = 18431
GATEWAY = "/tmp/gw/fake_gateway.py"
LOG = "/tmp/gw/log"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


@pytest.fixture(scope="module")
def agent_images(sandbox_image: str) -> dict[str, str]:
    return {name: ensure_agent_image(sandbox_image, parse_agent(name)) for name in ("mini-swe-agent", "aider")}


def open_box(image: str, project_dir: Path) -> DockerSandbox:
    spec = SandboxSpec(image=image, session=f"test-{uuid.uuid4().hex[:8]}", project_dir=project_dir,
                       labels={"harness.test": "1"})
    return DockerSandbox(spec)


@pytest.fixture
def mini_box(agent_images: dict[str, str], project_dir: Path) -> Iterator[DockerSandbox]:
    with open_box(agent_images["mini-swe-agent"], project_dir) as box:
        yield box


@pytest.fixture
def aider_box(agent_images: dict[str, str], project_dir: Path) -> Iterator[DockerSandbox]:
    with open_box(agent_images["aider"], project_dir) as box:
        yield box


def request(task: str = "Do the task.") -> AgentRequest:
    return AgentRequest(task=task, model="test-model", base_url=f"http://127.0.0.1:{PORT}/v1")


def with_gateway(box: DockerSandbox, script: list[dict[str, str]], command: str, env: dict[str, str],
                 timeout: float = 300.0, cwd: str = "/testbed") -> ExecResult:
    """`command` run while the scripted gateway serves PORT, in one exec (leftovers are swept after each)."""
    box.exec("mkdir -p /tmp/gw", save_output=False)
    box.write_file(GATEWAY, (Path(__file__).parent / "fake_gateway.py").read_bytes())
    box.write_file("/tmp/gw/script.json", json.dumps(script).encode())
    return box.exec(f"/usr/bin/python3 {GATEWAY} {PORT} /tmp/gw/script.json {LOG} & gw=$!; "
                    f"for _ in $(seq 100); do grep -q READY {LOG} 2>/dev/null && break; sleep 0.1; done; "
                    f"{command}; rc=$?; kill $gw; exit $rc", timeout=timeout, env=env, cwd=cwd)


def gateway_log(box: DockerSandbox) -> list[str]:
    return box.read_file(LOG).data.decode().splitlines()


def test_both_agents_start_offline_within_a_bounded_time(mini_box: DockerSandbox, aider_box: DockerSandbox) -> None:
    mini = mini_box.exec("/opt/agents/mini-swe-agent/bin/mini --help", timeout=120,
                         env=dict(parse_agent("mini-swe-agent").invocation(request()).env))
    assert not mini.timed_out and mini.exit_code == 0, mini.stdout.text + mini.stderr.text
    assert "--exit-immediately" in mini.stdout.text
    aider = aider_box.exec("/opt/agents/aider/bin/aider --version", timeout=120,
                           env=dict(parse_agent("aider").invocation(request()).env))
    assert not aider.timed_out and aider.exit_code == 0, aider.stdout.text + aider.stderr.text
    assert aider.stdout.text.strip() == "aider 0.86.2"


def test_python_on_path_stays_the_projects_and_testbed_is_the_workspace(mini_box: DockerSandbox) -> None:
    env = dict(parse_agent("mini-swe-agent").invocation(request()).env)
    found = mini_box.exec("command -v python; python -c 'import sys; print(sys.prefix)'; readlink /testbed; "
                          "ls /testbed; git config --system user.name", env=env)
    assert found.ok, found.stderr.text
    assert found.stdout.text.split() == ["/usr/local/bin/python", "/usr", "/workspace", "README.md", "pkg", "agent"]
    agent = mini_box.exec("/opt/agents/mini-swe-agent/bin/python -c 'import sys; print(sys.prefix)'")
    assert agent.stdout.text.strip() == "/opt/agents/mini-swe-agent"     # the agent's own is apart


def test_a_network_call_through_the_proxy_is_refused_at_once_and_the_model_endpoint_answers(
        mini_box: DockerSandbox) -> None:
    env = dict(parse_agent("mini-swe-agent").invocation(request()).env)
    probe = ("/usr/bin/python3 -c \"import sys, urllib.request as u\n"
             "try:\n    u.urlopen(sys.argv[1], timeout=20); print('OPENED')\n"
             "except Exception as e:\n    print(type(e).__name__, e)\" ")
    ran = with_gateway(mini_box, [{"content": "x"}], f"{probe} https://pypi.org/simple/; "
                       f"{probe} http://127.0.0.1:{PORT}/v1/models", env, timeout=60)
    lines = ran.stdout.text.splitlines()
    assert lines[0].startswith("URLError") and "403" in lines[0], lines       # the tunnel was refused
    assert lines[1] == "OPENED", lines                                         # the positive control
    assert "PROXY CONNECT pypi.org:443" in gateway_log(mini_box)


@pytest.mark.parametrize(("name", "script"), [
    ("mini-swe-agent", [{"content": "First.\n\n```mswea_bash_command\necho hello > made_by_mini.txt\n```"},
                        {"content": f"Done.\n\n```mswea_bash_command\n{SUBMIT}\n```"}]),
    ("mini-swe-agent-tools", [{"content": "First.", "tool": "echo hello > made_by_mini.txt"},
                              {"content": "Done.", "tool": SUBMIT}]),
])
def test_mini_runs_a_task_to_submission_through_the_gateway_alone(
        name: str, script: list[dict[str, str]], mini_box: DockerSandbox) -> None:
    invocation = parse_agent(name).invocation(request("Create made_by_mini.txt.\n-t --help $(id)"))
    write_files(mini_box, invocation)
    ran = with_gateway(mini_box, script, command_line(invocation), dict(invocation.env))
    assert not ran.timed_out and ran.exit_code == 0, ran.stdout.text[-3000:] + ran.stderr.text[-2000:]
    assert mini_box.read_file("/workspace/made_by_mini.txt").data == b"hello\n"
    trajectory = json.loads(mini_box.read_file(MINI_TRAJECTORY).data)
    assert trajectory["info"]["exit_status"] == "Submitted"
    assert "-t --help $(id)" in json.dumps(trajectory["messages"][1])           # the task, as written
    log = gateway_log(mini_box)
    tools = name.endswith("tools")
    assert log.count(f"MODEL /v1/chat/completions tools={tools} stream=None") == 2, log
    assert not [line for line in log if line.startswith("PROXY")], log


def test_aider_applies_its_edit_without_committing_and_leaves_nothing_else(aider_box: DockerSandbox) -> None:
    made = aider_box.exec("git init -q -b main && git add -A && git -c user.name=t -c user.email=t@t commit -qm base")
    assert made.ok, made.stderr.text
    invocation = parse_agent("aider").invocation(request("Change the README to say 'a changed project'."))
    write_files(aider_box, invocation)
    edit = "README.md\n```\n<<<<<<< SEARCH\na small project\n=======\na changed project\n>>>>>>> REPLACE\n```\n"
    ran = with_gateway(aider_box, [{"content": "I will edit it.\n\n" + edit}], command_line(invocation),
                       dict(invocation.env))
    assert not ran.timed_out and ran.exit_code == 0, ran.stdout.text[-3000:] + ran.stderr.text[-2000:]
    assert aider_box.read_file("/workspace/README.md").data == b"a changed project\n"
    status = aider_box.exec("git status --porcelain --untracked-files=all && git rev-list --count HEAD")
    assert status.stdout.text.split("\n")[:2] == [" M README.md", "1"], status.stdout.text   # no commit, no litter
    assert b"a changed project" in aider_box.read_file(AIDER_CHAT_HISTORY).data
    log = gateway_log(aider_box)
    models = [line for line in log if line.startswith("MODEL")]       # 2: aider asks again once README.md is added
    assert models and set(models) == {"MODEL /v1/chat/completions tools=False stream=None"}, log
    assert not [line for line in log if line.startswith("PROXY")], log

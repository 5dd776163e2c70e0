"""What a task supplies never becomes a Dockerfile instruction or a pip option: install_cmd runs as a bash
script from the build context (an ``ADD http://...`` line in it is a command not found, and the daemon
fetches nothing), and requirements pass one rule for task.json and instance rows alike."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from harness.core.task import Task, check_meta
from harness.environments import EnvironmentBuildError, ensure_task_image
from harness.errors import TaskError
from harness.evaluation.instance_files import load_instances
from sandbox.images import build_context
from tests.approval.helpers import CountingServer

from .conftest import TEST_LABELS

BAD_REQUIREMENTS = ["-i http://127.0.0.1:9/simple", "--extra-index-url http://127.0.0.1:9/simple", "-e .",
                    "./local-package", "/abs/package", "pytest>=8", "pytest==8.*",
                    "pytest==8.3.5\n--index-url http://127.0.0.1:9/simple", "evil @ http://127.0.0.1:9/evil-1.0.tar.gz",
                    "evil @ git+https://127.0.0.1:9/evil.git", "pytest==8.3.5 --hash=sha256:00"]
GOOD_REQUIREMENTS = ["pytest==8.3.5", "requests[socks]==2.32.3", 'tomli==2.0.1; python_version < "3.11"',
                     "wheelonly @ https://example.org/wheelonly-1.0-py3-none-any.whl"]


def test_requirements_pass_one_rule_in_task_json_and_in_instance_rows(tmp_path: Path) -> None:
    meta = {"id": "t", "test_cmd": "pytest -rA", "FAIL_TO_PASS": ["tests/test_x.py::test_y"]}
    assert check_meta({**meta, "requirements": GOOD_REQUIREMENTS}, "task.json") == []
    problems = check_meta({**meta, "requirements": BAD_REQUIREMENTS}, "task.json")
    assert len(problems) == len(BAD_REQUIREMENTS), problems
    assert all(repr(bad) in problem for bad, problem in zip(BAD_REQUIREMENTS, problems, strict=False))
    instances = tmp_path / "instances.jsonl"
    instances.write_text(json.dumps({"instance_id": "i", "problem_statement": "p", **meta,
                                     "requirements": json.dumps(BAD_REQUIREMENTS)}) + "\n")
    with pytest.raises(TaskError) as refused:
        load_instances(instances, None)
    said = [line for line in str(refused.value).splitlines() if "requirement " in line]
    assert [line.split(": ", 1)[1] for line in said] == [p.split(": ", 1)[1] for p in problems]
    assert all(line.startswith(f"  - {instances} instance") for line in said)


def _task(root: Path, install_cmd: str) -> Task:
    (root / "repo").mkdir(parents=True)
    (root / "repo" / "setup.py").write_text("# the project\n")
    return Task(id=root.name, problem_statement="p", repo_dir=root / "repo", install_cmd=install_cmd)


def _remove(client: docker.DockerClient, tag: str) -> None:
    try:
        client.images.remove(tag)
    except docker.errors.ImageNotFound:
        pass


def _remove_failed_build(client: docker.DockerClient, log: str) -> None:
    """Remove the untagged layers a failed build left (the last step that succeeded, and its untagged parents)."""
    steps = re.findall(r"^ ---> ([0-9a-f]{12})$", log, re.MULTILINE)
    if steps and not client.images.get(steps[-1]).tags:
        client.images.remove(steps[-1])


def test_install_cmd_runs_as_a_script_and_its_lines_never_reach_the_daemon(
        tmp_path: Path, docker_client: docker.DockerClient, sandbox_image: str) -> None:
    with CountingServer() as server:
        # the probe works where it should: a Dockerfile ADD line makes the daemon fetch from 127.0.0.1
        (tmp_path / "probe").mkdir()
        (tmp_path / "probe" / "Dockerfile").write_text(f"FROM {sandbox_image}\nADD {server.url('/probe')} /opt/probe\n")
        build_context(docker_client, tmp_path / "probe", "harness-test-probe:add", labels=TEST_LABELS)
        _remove(docker_client, "harness-test-probe:add")
        assert server.count("/probe") == 1
        attack = _task(tmp_path / "attack", f"true\nADD {server.url('/x')} /opt/x\n"
                                           f"COPY --from={sandbox_image} /etc/hostname /opt/y\nRUN true")
        with pytest.raises(EnvironmentBuildError) as failed:
            ensure_task_image(attack, sandbox_image, client=docker_client)
        _remove_failed_build(docker_client, str(failed.value))
        assert "ADD: command not found" in str(failed.value) and "returned a non-zero code: 127" in str(failed.value)
        assert server.count("/x") == 0
    multi = _task(tmp_path / "multi", "set -e\nprintf 'one\\n' > /workspace/lines.txt\n"
                                      "printf 'two %s\\n' \"$(ls setup.py)\" >> /workspace/lines.txt")
    tag = ensure_task_image(multi, sandbox_image, client=docker_client)
    try:
        out: Any = docker_client.containers.run(tag, ["cat", "/workspace/lines.txt"], remove=True,
                                                network_disabled=True, labels=TEST_LABELS)
        assert out.decode() == "one\ntwo setup.py\n"
    finally:
        _remove(docker_client, tag)

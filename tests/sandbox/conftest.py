"""Fixtures and helpers of the sandbox red-team suite: real containers, probes written in Python."""

from __future__ import annotations

import json
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.api import ExecResult, Limits, SandboxSpec
from sandbox.docker_sandbox import DockerSandbox


def make_spec(image: str, project_dir: Path | None = None, limits: Limits | None = None) -> SandboxSpec:
    return SandboxSpec(image=image, session=f"test-{uuid.uuid4().hex[:8]}", project_dir=project_dir,
                       limits=limits or Limits(), labels={"harness.test": "1"})


@pytest.fixture(scope="module")
def shared_box(sandbox_image: str) -> Iterator[DockerSandbox]:
    """One sandbox for the probes of a module that only look around (they change nothing lasting)."""
    with DockerSandbox(make_spec(sandbox_image)) as box:
        yield box


def run_python(box: DockerSandbox, code: str, timeout: float = 30) -> ExecResult:
    """Run a Python probe inside the sandbox (as the agent would, through the exec channel)."""
    box.write_file("/tmp/probe.py", textwrap.dedent(code).encode())
    return box.exec("python3 /tmp/probe.py", timeout=timeout)


def probe_json(box: DockerSandbox, code: str, timeout: float = 30) -> Any:
    """Run a probe whose last stdout line is JSON; return it parsed."""
    result = run_python(box, code, timeout)
    assert result.exit_code == 0, f"probe failed: {result.stdout.text}{result.stderr.text}"
    return json.loads(result.stdout.text.strip().splitlines()[-1])


def processes(box: DockerSandbox) -> list[str]:
    """`pid comm args` of every process in the sandbox but the shell and `ps` that list them."""
    result = box.exec("echo $$; ps -eo pid=,ppid=,comm=,args=", timeout=10)
    me, *lines = [line.split(None, 3) for line in result.stdout.text.splitlines() if line.strip()]
    return [f"{pid} {comm} {args}" for pid, ppid, comm, args in lines if me[0] not in (pid, ppid)]

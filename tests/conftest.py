"""Shared fixtures. Docker tests run by default and fail (never skip) when Docker is missing."""

from __future__ import annotations

import datetime
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from sandbox.api import SandboxSpec
from sandbox.docker_sandbox import DockerSandbox
from sandbox.images import ensure_image
from sandbox.reaper import owner_alive

pytest_plugins = ["tests.browser"]   # the `browser` fixture (real headless Chromium)

REPO_ROOT = Path(__file__).resolve().parent.parent
TASKS_DIR = REPO_ROOT / "tasks"


def _docker_client():  # type: ignore[no-untyped-def]
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure here means "no Docker"
        pytest.fail(f"Docker is required for this test and is not reachable ({exc}). "
                    "Start the Docker daemon (e.g. `sudo systemctl start docker`) and run again.",
                    pytrace=False)
    return client


@pytest.fixture(scope="session")
def docker_client():  # type: ignore[no-untyped-def]
    return _docker_client()


@pytest.fixture(scope="session")
def sandbox_image(docker_client) -> str:  # type: ignore[no-untyped-def]
    """The sandbox image tag, built once if its inputs changed."""
    return ensure_image(python="3.11")


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    """A small project to put in a sandbox."""
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (root / "README.md").write_text("a small project\n")
    return root


@pytest.fixture
def sandbox(sandbox_image: str, project_dir: Path) -> Iterator[object]:
    """A running DockerSandbox holding `project_dir`'s files; removed afterwards."""
    spec = SandboxSpec(image=sandbox_image, session=f"test-{uuid.uuid4().hex[:8]}", project_dir=project_dir,
                       labels={"harness.test": "1"})
    with DockerSandbox(spec) as box:
        yield box


_SESSION_STARTED = time.time()


def _created(stamp: str) -> float:
    """Docker's RFC 3339 timestamps (nanoseconds, 'Z' or an offset) as epoch seconds; 0 if unreadable."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)?", stamp or "")
    if not m:
        return 0.0
    zone = m.group(2) or "Z"
    text = m.group(1) + ("+00:00" if zone == "Z" else zone)
    return datetime.datetime.fromisoformat(text).timestamp()


def _leaked(labels: dict[str, str], created: float) -> bool:
    """Ours if made by this pytest process, or by a process of this run that is gone now."""
    if labels.get("harness.pid") == str(os.getpid()):
        return True
    return created >= _SESSION_STARTED and not owner_alive(labels)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a test, or a harness process a test started, left a container or volume behind.

    Containers of other test runs on the same machine (their owner process is alive) are not ours.
    """
    try:
        client = docker.from_env()
        managed = {"label": ["harness.managed=true"]}
        # the low-level list: it never inspects, so a container removed meanwhile cannot fail the check
        left = [c for c in client.api.containers(all=True, filters=managed)
                if _leaked(c.get("Labels") or {}, float(c.get("Created", 0)))]
        vols = [v for v in client.api.volumes(filters=managed).get("Volumes") or []
                if _leaked(v.get("Labels") or {}, _created(v.get("CreatedAt", "")))]
    except Exception:  # noqa: BLE001 - no Docker: the Docker tests already failed saying so
        return
    if left or vols:
        names = [(c.get("Names") or [c["Id"]])[0].lstrip("/") for c in left] + [v["Name"] for v in vols]
        for c in left:
            client.api.remove_container(c["Id"], force=True, v=True)
        for v in vols:
            client.api.remove_volume(v["Name"], force=True)
        print(f"\nLEAK: tests left {len(names)} container(s)/volume(s) behind: {names} (removed now)")
        session.exitstatus = 1

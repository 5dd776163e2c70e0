"""SandboxPool, the pool `harness eval --pool` uses: blanks started only for the sandboxes a caller said
it will take, each handed out once with the taker's project loaded, and nothing left behind."""

from __future__ import annotations

import dataclasses
import time
import uuid
from pathlib import Path

import docker
import pytest

from sandbox.api import Limits, SandboxSpec
from sandbox.errors import ImageError
from sandbox.factory import open_sandbox
from sandbox.pool import SandboxPool, shape_of

pytestmark = pytest.mark.docker


def _spec(image: str, kind: str, project: Path | None = None, tag: str = "") -> SandboxSpec:
    return SandboxSpec(image=image, session=f"test-{uuid.uuid4().hex[:8]}", project_dir=project,
                       labels={"harness.test": "1", "harness.pooltest": tag, "harness.kind": kind})


def _containers(tag: str) -> list[object]:
    return docker.from_env().containers.list(all=True, filters={"label": [f"harness.pooltest={tag}"]})


def _wait_ready(pool: SandboxPool, spec: SandboxSpec, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while pool.ready(spec) < count:
        assert time.monotonic() < deadline, f"{pool.ready(spec)} of {count} blanks ready after {timeout}s"
        time.sleep(0.05)


def test_expected_sandboxes_are_started_ahead_and_handed_out_once_with_the_takers_project(
        sandbox_image: str, project_dir: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    pool = SandboxPool(2)
    try:
        session = _spec(sandbox_image, "session", project_dir, tag)
        grading = _spec(sandbox_image, "grading", project_dir, tag)
        assert shape_of(session) == shape_of(grading)           # the kind and session do not matter
        pool.expect(session)
        pool.expect(grading)
        _wait_ready(pool, session, 2)
        time.sleep(0.5)
        assert pool.started == 2 and len(_containers(tag)) == 2  # no more than said
        first, second = pool.take(session), pool.take(grading)
        with first, second:
            assert first.container.id != second.container.id
            for box in (first, second):
                assert box.exec("cat README.md", timeout=10).stdout.text == "a small project\n"
                assert box.container.labels["harness.kind"] == "pooled"
                assert box.container.labels["harness.pooltest"] == tag
            first.exec("echo changed > README.md", timeout=10)   # one's work never reaches the other
            assert second.exec("cat README.md", timeout=10).stdout.text == "a small project\n"
        assert pool.hits == 2 and pool.misses == 0
        time.sleep(0.5)
        assert pool.ready(session) == 0 and _containers(tag) == []   # nothing refilled beyond the uses said
        with pool.take(session) as third:                        # nobody said: started on demand
            assert third.exec("cat README.md", timeout=10).stdout.text == "a small project\n"
        assert pool.misses == 1
    finally:
        pool.close()
    assert _containers(tag) == []


def test_a_take_waits_for_the_blank_being_started_instead_of_starting_another(sandbox_image: str) -> None:
    tag = uuid.uuid4().hex[:8]
    pool = SandboxPool(1)
    try:
        spec = _spec(sandbox_image, "grading", tag=tag)
        pool.expect(spec)
        with pool.take(spec) as box:                             # at once: the blank is still starting
            assert box.exec("echo up", timeout=10).stdout.text == "up\n"
        assert pool.hits == 1 and pool.misses == 0 and pool.started == 1
    finally:
        pool.close()
    assert _containers(tag) == []


def test_shapes_apart_and_close_removes_what_waits_and_what_is_starting(sandbox_image: str) -> None:
    tag = uuid.uuid4().hex[:8]
    pool = SandboxPool(1)
    spec = _spec(sandbox_image, "session", tag=tag)
    other = dataclasses.replace(spec, limits=Limits(cpus=0.5))
    assert shape_of(spec) != shape_of(other)
    pool.expect(spec, uses=3)                                     # at most 1 ready or starting per shape
    pool.expect(other)
    _wait_ready(pool, spec, 1)
    assert pool.ready(spec) == 1
    pool.close()                                                  # `other`'s may still be starting
    assert _containers(tag) == [] and pool.discarded >= 1
    pool.expect(spec)                                             # closed: nothing starts any more
    with pool.take(spec) as box:
        assert box.exec("true", timeout=10).exit_code == 0
    assert pool.misses == 1


def test_a_failing_background_start_is_said_and_the_taker_gets_the_error_as_without_a_pool(
        sandbox_image: str) -> None:
    said: list[str] = []
    pool = SandboxPool(1, report=said.append)
    try:
        spec = SandboxSpec(image="harness-no-such-image:1", session="test-missing", labels={"harness.test": "1"})
        pool.expect(spec)
        with pytest.raises(ImageError, match="does not exist"):
            pool.take(spec)
        deadline = time.monotonic() + 30
        while not said and time.monotonic() < deadline:
            time.sleep(0.05)
        assert said and "could not start a sandbox of harness-no-such-image:1" in said[0]
    finally:
        pool.close()


def test_open_sandbox_without_a_pool_starts_one(sandbox_image: str, project_dir: Path) -> None:
    with open_sandbox(_spec(sandbox_image, "session", project_dir)) as box:
        assert box.exec("cat README.md", timeout=10).stdout.text == "a small project\n"
    with pytest.raises(ValueError, match="0 or more"):
        SandboxPool(-1)

"""The warm pool: items started ahead, each handed out once, refilled in the background, replaced when
stale, and never left behind. Plain items here; the pool of real sandboxes is in test_pool_docker."""

from __future__ import annotations

import itertools
import threading
import time
import uuid

import docker
import pytest

from sandbox.api import SandboxSpec
from sandbox.pool import WarmPool, docker_pool


class Maker:
    def __init__(self, fail_first: int = 0, delay: float = 0.0) -> None:
        self.counter = itertools.count(1)
        self.closed: list[int] = []
        self.started: list[int] = []
        self.fail_first, self.delay = fail_first, delay
        self.lock = threading.Lock()

    def start(self) -> int:
        time.sleep(self.delay)
        with self.lock:
            n = next(self.counter)
        if n <= self.fail_first:
            raise RuntimeError(f"start {n} failed")
        self.started.append(n)
        return n

    def close(self, item: int) -> None:
        self.closed.append(item)


def test_ready_items_are_handed_out_once_and_refilled() -> None:
    maker = Maker()
    pool = WarmPool(maker.start, 2, maker.close)
    assert pool.wait_ready(timeout=10)
    first, second = pool.take(), pool.take()
    assert {first, second} == {1, 2} and pool.hits == 2
    assert pool.wait_ready(timeout=10)
    third = pool.take()
    assert third not in (first, second)      # never handed out again
    pool.close()
    assert sorted(maker.closed) == sorted(set(maker.started) - {first, second, third})   # the rest: closed
    assert pool.ready() == 0


def test_an_empty_pool_starts_one_now_and_a_size_zero_pool_never_starts_ahead() -> None:
    maker = Maker(delay=0.2)
    pool = WarmPool(maker.start, 0, maker.close)
    time.sleep(0.3)
    assert pool.ready() == 0
    assert pool.take() == 1 and pool.misses == 1
    pool.close()


def test_stale_items_are_closed_and_replaced_at_take() -> None:
    maker = Maker()
    fresh = {"ok": False}
    pool = WarmPool(maker.start, 1, maker.close, is_fresh=lambda _item: fresh["ok"])
    assert pool.wait_ready(timeout=10)
    got = pool.take()
    assert got != 1 and maker.closed == [1] and pool.stale == 1 and pool.misses == 1   # 1 was stale: closed
    fresh["ok"] = True
    assert pool.wait_ready(timeout=10) and pool.take() not in (1, got) and pool.hits == 1
    pool.close()


def test_background_failures_are_reported_and_retried_and_take_still_raises_its_own() -> None:
    said: list[str] = []
    maker = Maker(fail_first=2)
    pool = WarmPool(maker.start, 1, maker.close, report=said.append, retry_seconds=0.05)
    assert pool.wait_ready(timeout=10)
    assert any("could not start a sandbox" in s and "RuntimeError" in s for s in said)
    pool.close()
    failing = WarmPool(Maker(fail_first=99).start, 0, maker.close)
    with pytest.raises(RuntimeError, match="start 1 failed"):
        failing.take()


def test_an_item_finishing_after_close_is_closed_too() -> None:
    maker = Maker(delay=0.5)
    pool = WarmPool(maker.start, 1, maker.close)
    time.sleep(0.1)
    pool.close()            # the start in flight finishes, then its item is closed, not kept
    assert maker.closed == [1] and pool.ready() == 0
    with pytest.raises(ValueError, match="0 or more"):
        WarmPool(maker.start, -1, maker.close)


@pytest.mark.docker
def test_a_pool_of_real_sandboxes_hands_out_started_ones_and_leaves_nothing(sandbox_image: str) -> None:
    pool = docker_pool(lambda: SandboxSpec(image=sandbox_image, session=f"test-{uuid.uuid4().hex[:8]}",
                                           labels={"harness.test": "1", "harness.kind": "pooltest"}), 2)
    try:
        assert pool.wait_ready(timeout=60)
        started = time.perf_counter()
        box = pool.take()
        took = time.perf_counter() - started
        with box:
            assert box.exec("echo ready", timeout=10).stdout.text == "ready\n"
        assert took < 1.0                                    # handed out, not started (a start is ~0.3 s)
        assert pool.wait_ready(timeout=60)
    finally:
        pool.close()
    client = docker.from_env()
    assert client.containers.list(all=True, filters={"label": ["harness.kind=pooltest"]}) == []

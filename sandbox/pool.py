"""A warm pool: sandboxes started ahead of need, each handed out once.

    pool = WarmPool(start, size=2)      # `start()` makes one ready item (a started sandbox, or more)
    item = pool.take()                  # a ready item at once, or one started now when none is ready
    ...                                 # the caller owns it: it closes it; it never comes back
    pool.close()                        # stops refilling and closes the items still waiting

A background thread keeps `size` items ready: every `take` is followed by a refill. An item is never
reused after a session. Items carry the same owner labels as any sandbox (the reaper removes them if
the process dies), and `close` (or the process's exit, through the reaper) leaves nothing behind. A
start that fails in the background is retried after a pause and said through `report`; `take` then
starts one itself, so its errors reach the caller as they would without a pool.

`is_fresh(item)`, when given, is asked at `take`: an item that no longer fits (the project's files
changed since it was started) is closed and replaced by one started now.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from sandbox.api import SandboxSpec
from sandbox.docker_sandbox import DockerSandbox

T = TypeVar("T")


class WarmPool(Generic[T]):
    def __init__(self, start: Callable[[], T], size: int, close: Callable[[T], None], *,
                 is_fresh: Callable[[T], bool] | None = None, report: Callable[[str], None] = lambda _m: None,
                 retry_seconds: float = 5.0) -> None:
        if size < 0:
            raise ValueError(f"a pool size is a count of sandboxes, 0 or more; got {size}")
        self._start, self._close, self.size = start, close, size
        self._is_fresh, self._report, self._retry = is_fresh, report, retry_seconds
        self._ready: deque[T] = deque()
        self._lock = threading.Condition()
        self._closed = False
        self._starting = 0
        self.hits = self.misses = self.stale = 0
        self._thread: threading.Thread | None = None
        if size:
            self._thread = threading.Thread(target=self._refill, name="sandbox-pool", daemon=True)
            self._thread.start()

    def take(self) -> T:
        """A ready item, or one started now (its errors raised as they are)."""
        with self._lock:
            item = self._ready.popleft() if self._ready else None
            self._lock.notify_all()      # room for one more: the refill thread starts it
        if item is not None:
            if self._is_fresh is None or self._is_fresh(item):
                self.hits += 1
                return item
            self.stale += 1
            self._close_quietly(item)
        self.misses += 1
        return self._start()

    def ready(self) -> int:
        with self._lock:
            return len(self._ready)

    def wait_ready(self, count: int | None = None, timeout: float = 60.0) -> bool:
        """Wait until `count` (default: the pool's size) items are ready; False on timeout."""
        want = self.size if count is None else count
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self._ready) < want:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    return False
                self._lock.wait(left)
            return True

    def close(self) -> None:
        """Stop refilling and close every item still waiting (an item being started is closed when ready)."""
        with self._lock:
            self._closed = True
            waiting = list(self._ready)
            self._ready.clear()
            self._lock.notify_all()
        for item in waiting:
            self._close_quietly(item)
        if self._thread is not None:
            self._thread.join(timeout=120)

    def _refill(self) -> None:
        while True:
            with self._lock:
                while not self._closed and len(self._ready) + self._starting >= self.size:
                    self._lock.wait()
                if self._closed:
                    return
                self._starting += 1
            try:
                item = self._start()
            except Exception as exc:  # noqa: BLE001 - said, retried; `take` starts its own meanwhile
                self._report(f"the warm pool could not start a sandbox ({type(exc).__name__}: {exc}); "
                             f"trying again in {self._retry:g}s")
                with self._lock:
                    self._starting -= 1
                    self._lock.wait(self._retry)
                continue
            if not self._keep(item):
                self._close_quietly(item)
                return

    def _keep(self, item: T) -> bool:
        """Add a started item to the ready ones; False when the pool closed meanwhile."""
        with self._lock:
            self._starting -= 1
            if self._closed:
                return False
            self._ready.append(item)
            self._lock.notify_all()
            return True

    def _close_quietly(self, item: T) -> None:
        try:
            self._close(item)
        except Exception as exc:  # noqa: BLE001 - the reaper removes what could not be closed here
            self._report(f"the warm pool could not close a sandbox: {type(exc).__name__}: {exc}")


def docker_pool(make_spec: Callable[[], SandboxSpec], size: int, *,
                report: Callable[[str], None] = lambda _m: None) -> WarmPool[DockerSandbox]:
    """A pool of started `DockerSandbox`es, each from a new `make_spec()` (give each its own session)."""
    def start() -> DockerSandbox:
        box = DockerSandbox(make_spec())
        box.start()
        return box

    return WarmPool(start, size, lambda box: box.close(), report=report)

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

import dataclasses
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sandbox.api import SandboxSpec
from sandbox.docker_sandbox import DockerSandbox
from sandbox.factory import create_sandbox

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
        box = create_sandbox(make_spec())
        box.start()
        return box

    return WarmPool(start, size, lambda box: box.close(), report=report)


def shape_of(spec: SandboxSpec) -> tuple[object, ...]:
    """What two specs must share for one blank sandbox to serve either: everything but the session, the
    project and the kind label (a project is loaded after `take`)."""
    labels = {k: v for k, v in spec.labels.items() if k != "harness.kind"}
    return (spec.provider, spec.image, spec.limits, tuple(sorted(spec.env.items())), tuple(sorted(labels.items())),
            spec.direct_channel)


class SandboxPool:
    """Blank sandboxes (container up, channel open, no project yet) started ahead for the sandboxes a caller
    says it will take, by shape (image, limits, environment, labels).

        pool = SandboxPool(size=2)
        pool.expect(spec, uses=2)       # two sandboxes like `spec` will be taken: start up to 2 now
        box = pool.take(spec)           # a blank one, with spec's project loaded; or one started now
        ...                             # the caller owns it and closes it; it never comes back
        pool.close()                    # closes the blanks still waiting, and those still starting

    Unlike `WarmPool`, nothing is started that nobody said they would take: each shape keeps at most
    `size` blanks ready or starting, and no more than its outstanding expected uses. That suits an
    evaluation whose instances each have their own image: the grading sandbox starts while the agent
    works. A `take` that finds a blank of its shape still starting waits for it rather than starting
    another. Blanks carry the caller's labels (the kind label becomes "pooled") and the usual owner
    labels, so the reaper and a run's label sweep remove them like any sandbox. A background start that
    fails is said through `report`; the taker then starts its own, and its errors are raised as without
    a pool.
    """

    def __init__(self, size: int, *, report: Callable[[str], None] = lambda _m: None,
                 client: Any = None) -> None:
        if size < 0:
            raise ValueError(f"a pool size is a count of sandboxes, 0 or more; got {size}")
        self.size, self._report, self._client = size, report, client
        self._lock = threading.Condition()
        self._ready: dict[tuple[object, ...], deque[DockerSandbox]] = {}
        self._starting: dict[tuple[object, ...], int] = {}
        self._wanted: dict[tuple[object, ...], int] = {}
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.hits = self.misses = self.started = self.discarded = 0

    def expect(self, spec: SandboxSpec, uses: int = 1) -> None:
        """Say that `uses` more sandboxes of `spec`'s shape will be taken; blanks start for them in the background."""
        if self.size <= 0 or uses <= 0:
            return
        key = shape_of(spec)
        with self._lock:
            if self._closed:
                return
            self._wanted[key] = self._wanted.get(key, 0) + uses
            self._fill(key, spec)

    def take(self, spec: SandboxSpec) -> DockerSandbox:
        """A started sandbox of `spec` with its project loaded: a blank from the pool, or one started now.

        Raises:
            whatever `DockerSandbox.start` raises, when one is started now.
        """
        key = shape_of(spec)
        box = None
        with self._lock:
            while not self._closed:
                ready = self._ready.get(key)
                if ready:
                    box = ready.popleft()
                    break
                if not self._starting.get(key):
                    break
                self._lock.wait()
            # counted down only now: while this take waited, it still counted for the blanks to start
            if self._wanted.get(key, 0) > 0:
                self._wanted[key] -= 1
            if box is not None:
                self.hits += 1
                self._fill(key, spec)
            else:
                self.misses += 1
        if box is None:
            box = create_sandbox(spec, self._client)
            box.start()
            return box
        try:
            box.spec = dataclasses.replace(spec, session=box.spec.session, labels=box.spec.labels)
            box.load_project()
        except BaseException:
            box.close()
            raise
        return box

    def close(self) -> None:
        """Close every blank still waiting; those still starting are closed as they come up (waited for)."""
        with self._lock:
            self._closed = True
            waiting = [box for ready in self._ready.values() for box in ready]
            self._ready.clear()
            self.discarded += len(waiting)
            threads = list(self._threads)
            self._lock.notify_all()
        for box in waiting:
            _close_quietly(box, self._report)
        for thread in threads:
            thread.join(timeout=120)

    def ready(self, spec: SandboxSpec) -> int:
        with self._lock:
            return len(self._ready.get(shape_of(spec), ()))

    def _fill(self, key: tuple[object, ...], spec: SandboxSpec) -> None:
        """Start blanks of `key` up to the size and the outstanding expected uses (lock held)."""
        have = len(self._ready.get(key, ())) + self._starting.get(key, 0)
        for _ in range(max(0, min(self.size, self._wanted.get(key, 0)) - have)):
            self._starting[key] = self._starting.get(key, 0) + 1
            blank = SandboxSpec(image=spec.image, session=f"pool-{uuid.uuid4().hex[:10]}", limits=spec.limits,
                                env=dict(spec.env), direct_channel=spec.direct_channel,
                                labels={**spec.labels, "harness.kind": "pooled"}, provider=spec.provider,
                                max_copy_bytes=spec.max_copy_bytes, max_copy_files=spec.max_copy_files)
            thread = threading.Thread(target=self._start_one, args=(key, blank), name="sandbox-pool", daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()

    def _start_one(self, key: tuple[object, ...], blank: SandboxSpec) -> None:
        box = create_sandbox(blank, self._client)
        try:
            box.start_blank()
            # one command ahead: the channel proven, and a bash left waiting for the taker's first command
            # (else it starts one then: 5-10 ms in a container that has run nothing yet)
            box.exec(":", timeout=30, save_output=False)
            started = True
        except Exception as exc:  # noqa: BLE001 - said; the taker starts its own
            self._report(f"the warm pool could not start a sandbox of {blank.image} ({type(exc).__name__}: {exc})")
            _close_quietly(box, self._report)   # started, and its first command failed
            started = False
        with self._lock:
            self._starting[key] -= 1
            kept = started and not self._closed
            if kept:
                self._ready.setdefault(key, deque()).append(box)
                self.started += 1
            elif started:
                self.discarded += 1   # the pool closed meanwhile
            self._lock.notify_all()
        if started and not kept:
            _close_quietly(box, self._report)


def _close_quietly(box: DockerSandbox, report: Callable[[str], None]) -> None:
    try:
        box.close()
    except Exception as exc:  # noqa: BLE001 - the reaper removes what could not be closed here
        report(f"the warm pool could not close a sandbox: {type(exc).__name__}: {exc}")


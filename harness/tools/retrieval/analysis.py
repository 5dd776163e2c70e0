"""A file's analysis for `find_code` (its chunks and their term counts), and analysing many at once.

Analysing is CPU work: an AST per Python file and millions of identifiers on a django-sized tree (5 s
in one thread here). With more than `PROCESS_MIN_BYTES` of text it runs in worker processes, one per
core the harness may use (at most `MAX_WORKERS`), started fresh with `spawn` (they inherit none of
the harness's threads or locks), at a lower priority than the session, with their stdout on
/dev/null (`harness mcp` speaks its protocol on the harness's), and stopped when the work is done or
given up. Below that, starting workers would cost more than it saves: the caller's thread does it.
"""

from __future__ import annotations

import marshal
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from itertools import chain

from harness.tools.editing.lint import gc_paused
from harness.tools.retrieval.chunk_cache import Analysed
from harness.tools.retrieval.chunks import PYTHON, chunk_file, term_counts

PROCESS_MIN_BYTES = 4 << 20       # text from which worker processes pay for their start
TASK_BYTES = 256 << 10            # text sent to a worker at a time
MAX_WORKERS = 4

Item = tuple[str, str, bytes]     # (cache key, path, content)
Work = list[Item]
Sink = Callable[[Mapping[str, bytes]], None]   # receives analyses in `marshal` form, by cache key


def cache_key(path: str, sha256: str) -> str:
    """What an analysis depends on: the content, and whether it is cut as Python."""
    return f"{sha256}:{'py' if path.endswith(PYTHON) else 'text'}"


def analyse(path: str, text: str) -> Analysed:
    """`text` cut into chunks, each with the term counts of its name (twice: names weigh more) and text;
    the path's terms are added when the file is indexed (the same content may sit at several paths)."""
    return [(c.start, c.end, c.kind, c.name, c.text, dict(term_counts(f"{c.name} {c.name} {c.text}")))
            for c in chunk_file(path, text)]


def default_workers() -> int:
    return min(MAX_WORKERS, len(os.sched_getaffinity(0)))


def analyse_many(items: Iterable[Item], sink: Sink, stop: threading.Event | None = None,
                 workers: int | None = None) -> int:
    """Analyse each item and hand the results to `sink` in batches; returns how many were analysed.
    Stops early (between batches) once `stop` is set. `workers`: None for `default_workers()`, 0 or 1
    for this thread only. Workers that cannot start or die (no working semaphores, the OOM killer)
    leave their work to this thread."""
    stop = stop or threading.Event()
    workers = default_workers() if workers is None else workers
    items = iter(items)
    head: Work = []
    size = 0
    for item in items:                   # enough text to pay for workers? (read lazily: bounded memory)
        head.append(item)
        size += len(item[2])
        if size >= PROCESS_MIN_BYTES:
            break
    tasks = _tasks(chain(head, items))
    done = 0
    if workers > 1 and size >= PROCESS_MIN_BYTES:
        done, left = _in_processes(tasks, sink, stop, workers)
        tasks = chain(left, tasks)
    for work in tasks:
        if stop.is_set():
            break
        sink(marshal.loads(_analyse_packed(work)))
        done += len(work)
    return done


def _analyse_packed(work: Work) -> bytes:
    """A worker's task: the analyses of `work`, each in the cache's `marshal` form, as one marshal
    value (plain values: quick to send back, and stored as they come)."""
    with gc_paused():      # trees and counts hold no cycles; the collector's passes cost a quarter
        return marshal.dumps({key: marshal.dumps(analyse(path, data.decode("utf-8", "replace")))
                              for key, path, data in work})


def _worker_setup() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C is the harness's to handle: it stops the pool
    try:
        os.nice(10)
    except OSError:
        pass
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def _tasks(items: Iterable[Item]) -> Iterator[Work]:
    task: Work = []
    size = 0
    for item in items:
        task.append(item)
        size += len(item[2])
        if size >= TASK_BYTES:
            yield task
            task, size = [], 0
    if task:
        yield task


def _in_processes(tasks: Iterator[Work], sink: Sink, stop: threading.Event, workers: int) -> tuple[int, list[Work]]:
    """Run `tasks` in worker processes; returns how many items were analysed, and the tasks taken but
    left undone because the workers could not start or broke (the caller does those)."""
    done_count = 0
    pending: dict[Future[bytes], Work] = {}
    try:
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_worker_setup)
    except (OSError, ImportError, NotImplementedError):
        return 0, []
    try:
        while True:
            while len(pending) < 2 * workers and not stop.is_set():   # a few in flight: memory stays bounded
                task = next(tasks, None)
                if task is None:
                    break
                try:
                    pending[pool.submit(_analyse_packed, task)] = task
                except (BrokenProcessPool, OSError, RuntimeError):   # a worker could not start
                    return done_count, [task, *pending.values()]
            if not pending or stop.is_set():
                break
            done, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in done:
                task = pending.pop(future)
                try:
                    fresh: dict[str, bytes] = marshal.loads(future.result())
                except (BrokenProcessPool, OSError):
                    pending[future] = task       # done by the caller, with the rest
                    return done_count, list(pending.values())
                sink(fresh)
                done_count += len(fresh)
    except (BrokenProcessPool, OSError):
        return done_count, list(pending.values())
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
    return done_count, []

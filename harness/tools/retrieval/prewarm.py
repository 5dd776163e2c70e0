"""Analysing a project's files for `find_code` while the session starts, from the host's copy.

At the start of a session /workspace holds exactly the files of the task's folder on the host, so
their analyses (chunks and term counts, `harness.tools.retrieval.chunk_cache`) can be made from that
folder in a background thread, with no sandbox I/O, while the sandbox starts and the model reads the
task. The first `find_code` then lists the fingerprints in the sandbox (one command), finds every
file in the cache, and only builds the postings. Files the agent changed meanwhile are simply cache
misses.

Analysing is CPU work (an AST per Python file, millions of identifiers on a django-sized tree), so
a large tree is analysed by worker processes, one per core, started fresh (`spawn`: nothing of the
harness's threads or locks is inherited) at a lower priority than the session, and stopped with the
warming; the thread only reads, hashes and stores. A small tree is analysed in the thread: starting
workers would cost more than it saves.
"""

from __future__ import annotations

import hashlib
import marshal
import multiprocessing
import os
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from itertools import chain
from pathlib import Path

from harness.tools.retrieval.chunk_cache import Analysed, ChunkCache
from harness.tools.retrieval.code_index import CodeIndex, analyse, cache_key

MAX_FILE_BYTES = 512 * 1024
BATCH = 400                       # files read, hashed and looked up in the cache at a time
PROCESS_MIN_BYTES = 4 << 20       # uncached text from which worker processes pay for their start
TASK_BYTES = 256 << 10            # text sent to a worker at a time
MAX_WORKERS = 4

Item = tuple[str, str, bytes]     # (cache key, path, content)
Work = list[Item]


def indexable(root: Path, extensions: tuple[str, ...], skip_dirs: tuple[str, ...]) -> list[Path]:
    """The files under `root` find_code indexes (the same rule as its `find` command; links not followed)."""
    found: list[Path] = []
    suffixes = tuple(f".{e}" for e in extensions)
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip_dirs and not d.endswith(".egg-info")]
        for name in files:
            path = Path(folder) / name
            if name.endswith(suffixes) and path.is_file() and not path.is_symlink() \
                    and path.stat().st_size < MAX_FILE_BYTES:
                found.append(path)
    return found


def warm(root: Path, cache: ChunkCache, extensions: tuple[str, ...], skip_dirs: tuple[str, ...],
         stop: threading.Event | None = None, workers: int | None = None) -> int:
    """Put the analysis of every indexable file under `root` into `cache`; returns how many were new.

    `workers`: processes for a large tree (None: one per core the process may use, at most
    MAX_WORKERS; 0 or 1: always in this thread)."""
    stop = stop or threading.Event()
    if workers is None:
        workers = min(MAX_WORKERS, len(os.sched_getaffinity(0)))
    missing = _uncached(root, cache, extensions, skip_dirs, stop)
    head: Work = []
    size = 0
    for item in missing:                 # enough uncached text to pay for workers? (read lazily: bounded memory)
        head.append(item)
        size += len(item[2])
        if size >= PROCESS_MIN_BYTES:
            break
    if workers > 1 and size >= PROCESS_MIN_BYTES:
        return _in_processes(chain(head, missing), cache, stop, workers)
    learnt = 0
    for work in _tasks(chain(head, missing)):
        if stop.is_set():
            break
        fresh = _analyse(work)
        cache.put_many(fresh)
        learnt += len(fresh)
    return learnt


def _uncached(root: Path, cache: ChunkCache, extensions: tuple[str, ...], skip_dirs: tuple[str, ...],
              stop: threading.Event) -> Iterator[Item]:
    """(key, path, content) of each indexable file whose analysis the cache lacks (one copy per content)."""
    files = indexable(root, extensions, skip_dirs)
    seen: set[str] = set()
    for i in range(0, len(files), BATCH):
        if stop.is_set():
            return
        contents: dict[str, tuple[str, bytes]] = {}
        for path in files[i:i + BATCH]:
            try:
                data = path.read_bytes()
            except OSError:
                continue
            rel = path.relative_to(root).as_posix()
            key = cache_key(rel, hashlib.sha256(data).hexdigest())
            if key not in seen:
                seen.add(key)
                contents[key] = (rel, data)
        known = cache.get_many(contents)
        yield from ((key, rel, data) for key, (rel, data) in contents.items() if key not in known)


def _analyse(work: Work) -> dict[str, Analysed]:
    return {key: analyse(rel, data.decode("utf-8", "replace")) for key, rel, data in work}


def _analyse_packed(work: Work) -> bytes:
    """A worker's task: the analyses of `work` as marshal data (plain values, quick to send back)."""
    return marshal.dumps(_analyse(work))


def _lower_priority() -> None:
    try:
        os.nice(10)
    except OSError:
        pass


def _tasks(missing: Iterable[Item]) -> Iterator[Work]:
    task: Work = []
    size = 0
    for item in missing:
        task.append(item)
        size += len(item[2])
        if size >= TASK_BYTES:
            yield task
            task, size = [], 0
    if task:
        yield task


def _in_processes(missing: Iterable[Item], cache: ChunkCache, stop: threading.Event, workers: int) -> int:
    learnt = 0
    tasks = _tasks(missing)
    pending: set[Future[bytes]] = set()
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_lower_priority) as pool:
        try:
            while True:
                while len(pending) < 2 * workers and not stop.is_set():   # a few in flight: memory stays bounded
                    task = next(tasks, None)
                    if task is None:
                        break
                    pending.add(pool.submit(_analyse_packed, task))
                if not pending or stop.is_set():
                    break
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in done:
                    fresh: dict[str, Analysed] = marshal.loads(future.result())
                    cache.put_many(fresh)
                    learnt += len(fresh)
        finally:
            for future in pending:
                future.cancel()
            pool.shutdown(wait=True, cancel_futures=True)
    return learnt


def start_warming(index: CodeIndex, root: Path | None, extensions: tuple[str, ...],
                  skip_dirs: tuple[str, ...]) -> threading.Thread | None:
    """Warm `index`'s cache from `root` in a daemon thread; `index.sync` waits for it (bounded)."""
    if index.cache is None or root is None or not Path(root).is_dir():
        return None
    cache = index.cache

    def run() -> None:
        try:
            warm(Path(root), cache, extensions, skip_dirs, index.stop_warming)
        except Exception:  # noqa: BLE001 - warming is an optimisation: find_code analyses what is missing
            pass

    thread = threading.Thread(target=run, name="find-code-warm", daemon=True)
    index.warming = thread
    thread.start()
    return thread

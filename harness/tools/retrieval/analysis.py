"""A file's analysis for `find_code` (its chunks and their term counts), and analysing many at once.

Analysing is CPU work: an outline per Python file and millions of identifiers on a django-sized tree
(2.2 s in one thread here). With more than `PROCESS_MIN_BYTES` of text it runs in worker processes,
one per core the harness may use (at most `MAX_WORKERS`). Each is a new interpreter running
`worker_main` with the current folder off its path (`core.interpreter`: the operator may stand in a
project holding a `harness` folder of its own). Not `multiprocessing`: its `spawn` runs the caller's
main script again in every child, so a script using the harness as a library without an
`if __name__ == "__main__"` guard would start its work again there. A worker reads tasks on its
stdin and answers on its stdout (anything it prints goes to /dev/null), ignores Ctrl-C (the harness
stops it), runs at a lower priority than the session, and is killed when the work is done or given
up. Workers that cannot start or die leave their work to the calling thread; below
`PROCESS_MIN_BYTES`, starting them would cost more than it saves.
"""

from __future__ import annotations

import gc
import marshal
import os
import selectors
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import chain
from pathlib import Path
from typing import IO, TYPE_CHECKING

from harness.core.interpreter import python_command
from harness.tools.editing.lint import gc_paused
from harness.tools.retrieval.chunks import PYTHON, chunk_file, embed_text, term_counts, vector_key

if TYPE_CHECKING:
    from harness.tools.retrieval.chunk_cache import Analysed

PROCESS_MIN_BYTES = 4 << 20       # text from which worker processes pay for their start
TASK_BYTES = 256 << 10            # text sent to a worker at a time
MAX_WORKERS = 4
PREVIEW = 150                     # characters of a chunk's first line kept to show

Item = tuple[str, str, bytes]     # (cache key, path, content)
Work = list[Item]
Sink = Callable[[Mapping[str, bytes]], None]   # receives analyses in `marshal` form, by cache key


def cache_key(path: str, sha256: str) -> str:
    """What an analysis depends on: the content, and whether it is cut as Python."""
    return f"{sha256}:{'py' if path.endswith(PYTHON) else 'text'}"


def analyse(path: str, text: str) -> Analysed:
    """`text` cut into chunks, each with its first line (what `find_code` shows of it) and the term
    counts of its name (twice: names weigh more) and text; the path's terms are added when the file
    is indexed (the same content may sit at several paths), and the key of its dense vector
(`embedding.vector_key`: the vector itself is made later, `dense.py`). Only that line of a chunk's text is kept:
    the whole text had been half of an analysis to send, store and load (41 MB for a django tree)."""
    return [(c.start, c.end, c.kind, c.name, preview(c.text), term_counts(f"{c.name} {c.name} {c.text}"),
             vector_key(embed_text(c.kind, c.name, c.text))) for c in chunk_file(path, text)]


def preview(text: str) -> str:
    """The first line of `text` that is not blank, without its indentation, at most `PREVIEW` characters."""
    return next((line.strip() for line in text.split("\n") if line.strip()), "")[:PREVIEW]


def default_workers() -> int:
    return min(MAX_WORKERS, len(os.sched_getaffinity(0)))


def analyse_many(items: Iterable[Item], sink: Sink, stop: threading.Event | None = None,
                 workers: int | None = None, size: int | None = None) -> int:
    """Analyse each item and hand the results to `sink` in batches; returns how many were analysed.
    Stops early (between batches) once `stop` is set. `workers`: None for `default_workers()`, 0 or 1
    for this thread only. Workers that cannot start or die (no interpreter to run, the OOM killer)
    leave their work to this thread. `size`: the items' bytes in all, when the caller knows it (the
    workers then start before the first item is read; otherwise items are read ahead to decide)."""
    stop = stop or threading.Event()
    workers = default_workers() if workers is None else workers
    items = iter(items)
    head: Work = []
    if size is None:
        size = 0
        for item in items:               # enough text to pay for workers? (read lazily: bounded memory)
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
        sink(_analyse_each(work))
        done += len(work)
    return done


def _analyse_each(work: Work) -> dict[str, bytes]:
    """The analyses of `work` by cache key, each in the cache's `marshal` form."""
    with gc_paused():      # trees and counts hold no cycles; the collector's passes cost a quarter
        return {key: marshal.dumps(analyse(path, data.decode("utf-8", "replace"))) for key, path, data in work}


def _analyse_packed(work: Work) -> bytes:
    """A worker's task: `_analyse_each` as one marshal value (plain values: quick to send back)."""
    return marshal.dumps(_analyse_each(work))


def worker_main() -> None:
    """An analysis worker process: each task a Work list, each answer `_analyse_packed`'s bytes (`serve`)."""
    serve(lambda task: _analyse_packed(marshal.loads(task)))


def serve(handle: Callable[[bytes], bytes]) -> None:
    """A worker process's loop: each task is a 4-byte big-endian length and that many bytes of
    `marshal` data on stdin, each answer the same framing of `handle`'s bytes on stdout; it ends
    when stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C is the harness's to handle: it stops us
    try:
        os.nice(10)
    except OSError:
        pass
    gc.disable()                  # nothing here makes cycles (see lint.gc_paused)
    answers = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)           # a stray print cannot corrupt the answers
    os.close(devnull)
    tasks = sys.stdin.buffer
    while True:
        task = _read_frame(tasks)
        if task is None:
            return
        answer = handle(task)
        answers.write(len(answer).to_bytes(4, "big") + answer)
        answers.flush()


def _read_frame(stream: IO[bytes]) -> bytes | None:
    head = stream.read(4)
    if len(head) < 4:
        return None
    size = int.from_bytes(head, "big")
    body = stream.read(size)
    return body if len(body) == size else None


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


WORKER_CODE = "from harness.tools.retrieval.analysis import worker_main; worker_main()"


def _start_worker() -> subprocess.Popen[bytes]:
    """An analysis worker."""
    return start_process(WORKER_CODE)


def start_process(code: str) -> subprocess.Popen[bytes]:
    """A worker running `code` on this interpreter, finding this harness whatever made it importable here."""
    home = str(Path(__file__).resolve().parents[3])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([home, *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.Popen(python_command("-c", code), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, close_fds=True)


def _in_processes(tasks: Iterator[Work], sink: Sink, stop: threading.Event, workers: int) -> tuple[int, list[Work]]:
    """Analyse `tasks` in worker processes (`run_in_processes`); the tasks left undone come back as Work."""
    done, left = run_in_processes((marshal.dumps(task) for task in tasks), sink, stop, workers,
                                  lambda: _start_worker())
    return done, [marshal.loads(task) for task in left]


def run_in_processes(tasks: Iterator[bytes], sink: Sink, stop: threading.Event, workers: int,
                     start: Callable[[], subprocess.Popen[bytes]]) -> tuple[int, list[bytes]]:
    """Run `tasks` (each `marshal` data) in worker processes `start` starts (each a `serve` loop), one task
    at a time each, handing each answer (a `marshal` dict) to `sink`; returns how many answers' entries
    came back, and the tasks taken but left undone because a worker could not start or died (the caller
    does those). Every worker is gone when it returns."""
    done_count = 0
    started: list[subprocess.Popen[bytes]] = []
    busy: dict[int, tuple[subprocess.Popen[bytes], bytes]] = {}
    sel = selectors.DefaultSelector()
    try:
        if not sys.executable:
            return 0, []
        try:
            for _ in range(workers):
                started.append(start())
        except OSError:
            return 0, []
        idle = list(started)
        while True:
            while idle and not stop.is_set():
                task = next(tasks, None)
                if task is None:
                    break
                worker = idle.pop()
                assert worker.stdin is not None and worker.stdout is not None
                try:
                    worker.stdin.write(len(task).to_bytes(4, "big") + task)
                    worker.stdin.flush()
                except OSError:                  # it died before reading
                    return done_count, [task, *(t for _, t in busy.values())]
                busy[worker.stdout.fileno()] = (worker, task)
                sel.register(worker.stdout, selectors.EVENT_READ)
            if not busy or stop.is_set():
                return done_count, []
            for key, _ in sel.select(0.5):
                worker, task = busy.pop(key.fd)
                sel.unregister(key.fd)
                assert worker.stdout is not None
                answer = _read_frame(worker.stdout)
                if answer is None:               # it died mid-task
                    return done_count, [task, *(t for _, t in busy.values())]
                fresh: dict[str, bytes] = marshal.loads(answer)
                sink(fresh)
                done_count += len(fresh)
                idle.append(worker)
    finally:
        sel.close()
        for worker in started:
            worker.kill()
            worker.wait()
            for pipe in (worker.stdin, worker.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:     # a task left unsent in the buffer of a worker that died: EPIPE
                        pass

"""The host cache of file analyses behind find_code's index: same index with or without it, only unseen
content fetched, and a broken cache never breaks a query. Real SQLite files."""

from __future__ import annotations

import hashlib
import marshal
import multiprocessing
import sqlite3
import threading
from collections import Counter
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest

from harness.tools.retrieval import analysis, chunk_cache, prewarm
from harness.tools.retrieval.analysis import cache_key
from harness.tools.retrieval.chunk_cache import ChunkCache
from harness.tools.retrieval.chunks import term_counts, terms
from harness.tools.retrieval.code_index import CodeIndex
from harness.tools.retrieval.find_code import EXTENSIONS, SKIP_DIRS
from harness.tools.retrieval.prewarm import indexable, start_warming, warm

FILES = {
    "shop/cart.py": "class Cart:\n    def total(self, items):\n        return sum(i.price for i in items)\n\n"
                    "def applyDiscount(cart, rate):\n    return cart.total([]) * (1 - rate)\n",
    "shop/copy_of_cart.py": "",
    "README.md": "# Shop\n\nCarts, totals and discount codes.\n",
    "shop/broken.py": "def half(:\n    pass\n",
}
FILES["shop/copy_of_cart.py"] = FILES["shop/cart.py"]     # same content, another path


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _fps(files: dict[str, str]) -> dict[str, str]:
    return {p: _sha(t) for p, t in files.items()}


def _index(cache: ChunkCache | None, files: dict[str, str], fetched: list[str]) -> CodeIndex:
    index = CodeIndex(cache=cache)

    def fetch(paths: list[str]) -> dict[str, str]:
        fetched.extend(paths)
        return {p: files[p] for p in paths}

    index.sync(_fps(files), fetch)
    return index


def _shape(index: CodeIndex) -> tuple[object, ...]:
    chunks = sorted((c.path, c.start, c.end, c.kind, c.name, c.text) for c in index.chunks.values())
    postings = sorted((t, sorted((index.chunks[c].path, index.chunks[c].start, tf)
                                 for c, tf in index.posting(t).items()))
                      for t in index.vocabulary())
    return chunks, postings, index.total_length


def test_term_counts_are_the_counts_of_terms() -> None:
    text = "def topWords(text_in, n):\n    counting HTTPServer __init__ self.top_words the café\n"
    assert term_counts(text) == Counter(terms(text))


def test_a_warm_cache_gives_the_same_index_without_fetching(tmp_path: Path) -> None:
    cache = ChunkCache(tmp_path / "cache.sqlite3")
    plain = _index(None, FILES, [])
    first: list[str] = []
    cold = _index(cache, FILES, first)
    assert sorted(first) == sorted(FILES)
    again: list[str] = []
    warm = _index(cache, FILES, again)
    assert again == []                                   # nothing fetched, nothing analysed
    assert _shape(plain) == _shape(cold) == _shape(warm)
    query = "discount total"
    assert [c.path for c, _ in warm.search(query, 3)] == [c.path for c, _ in plain.search(query, 3)]
    # the path's own terms count for each copy of the same content
    assert {c.path for c, _ in warm.search("copy of", 5)} == {"shop/copy_of_cart.py"}


def test_only_changed_content_is_fetched_and_the_index_follows_edits(tmp_path: Path) -> None:
    cache = ChunkCache(tmp_path / "cache.sqlite3")
    _index(cache, FILES, [])
    edited = dict(FILES, **{"shop/cart.py": FILES["shop/cart.py"].replace("applyDiscount", "apply_coupon")})
    fetched: list[str] = []
    index = _index(cache, edited, fetched)
    assert fetched == ["shop/cart.py"]
    names = {c.name for c in index.chunks.values()}
    assert "apply_coupon" in names and "applyDiscount" in names     # the copy still has the old function
    assert _shape(index) == _shape(_index(None, edited, []))


def test_python_and_text_analyses_of_the_same_content_are_kept_apart() -> None:
    sha = _sha("def f():\n    pass\n")
    assert cache_key("a.py", sha) != cache_key("a.txt", sha) and cache_key("a.pyi", sha) == cache_key("b.py", sha)


def test_a_broken_cache_is_skipped_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite3"
    cache = ChunkCache(path)
    _index(cache, FILES, [])
    cache.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE chunks SET data = ?", [b"\x00garbage"])
    db.commit()
    db.close()
    fetched: list[str] = []
    index = _index(ChunkCache(path), FILES, fetched)
    assert sorted(fetched) == sorted(FILES) and _shape(index) == _shape(_index(None, FILES, []))
    # an old version's entries are never used
    db = sqlite3.connect(path)
    db.execute("UPDATE chunks SET version = 0")
    db.commit()
    db.close()
    fetched.clear()
    _index(ChunkCache(path), FILES, fetched)
    assert sorted(fetched) == sorted(FILES)
    # a cache that cannot be opened (its folder is a file)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    fetched.clear()
    index = _index(ChunkCache(blocker / "cache.sqlite3"), FILES, fetched)
    assert sorted(fetched) == sorted(FILES) and index.chunks


def test_the_cache_keeps_at_most_max_rows_least_recently_used_first(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunk_cache, "MAX_ROWS", 3)
    cache = ChunkCache(tmp_path / "cache.sqlite3")
    for n in range(5):
        cache.put_many({f"k{n}": [(1, 1, "lines", "", f"text {n}", {"text": 1})]})
    assert sorted(cache.get_many([f"k{n}" for n in range(5)])) == ["k2", "k3", "k4"]
    assert marshal.loads(marshal.dumps(cache.get_many(["k4"])["k4"])) == [(1, 1, "lines", "", "text 4", {"text": 1})]


def test_prewarming_from_the_host_copy_leaves_nothing_to_fetch(tmp_path: Path) -> None:
    root = tmp_path / "project"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "node_modules").mkdir()
    (root / "node_modules" / "x.js").write_text("function skipped() {}\n")
    (root / "big.py").write_text("x = 1\n" * 100_000)           # over the size limit: find_code skips it too
    (root / "link.py").symlink_to(root / "shop" / "cart.py")
    assert {p.relative_to(root).as_posix() for p in indexable(root, EXTENSIONS, SKIP_DIRS)} == set(FILES)
    cache = ChunkCache(tmp_path / "cache.sqlite3")
    index = CodeIndex(cache=cache)
    thread = start_warming(index, root, EXTENSIONS, SKIP_DIRS)
    assert thread is not None
    fetched: list[str] = []

    def fetch(paths: list[str]) -> dict[str, str]:
        fetched.extend(paths)
        return {p: FILES[p] for p in paths}

    index.sync(_fps(FILES), fetch)          # waits for the warming thread, then finds everything cached
    assert fetched == [] and _shape(index) == _shape(_index(None, FILES, []))
    assert warm(root, cache, EXTENSIONS, SKIP_DIRS) == 0         # a second pass learns nothing new
    stopped = threading.Event()
    stopped.set()
    assert warm(root, ChunkCache(tmp_path / "other.sqlite3"), EXTENSIONS, SKIP_DIRS, stopped) == 0


def _project(root: Path, copies: int) -> dict[str, str]:
    files = {f"pkg/m{n}.py": f"def step_{n}(value):\n    return value + {n}\n\n\nclass Holder{n}:\n"
                             f"    def read(self):\n        return {n}\n" for n in range(copies)}
    files.update(FILES)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return files


def test_a_large_tree_is_analysed_by_worker_processes_exactly_as_in_the_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analysis, "PROCESS_MIN_BYTES", 1)      # any tree is "large"
    monkeypatch.setattr(analysis, "TASK_BYTES", 200)           # a few files per task: many tasks in flight
    root = tmp_path / "project"
    files = _project(root, 40)
    keys = [cache_key(p, _sha(t)) for p, t in files.items()]
    in_thread, in_processes = ChunkCache(tmp_path / "thread.sqlite3"), ChunkCache(tmp_path / "procs.sqlite3")
    pools: list[int] = []

    class Counted(ProcessPoolExecutor):
        def __init__(self, workers: int, **kwargs: Any) -> None:
            pools.append(workers)
            super().__init__(workers, **kwargs)

    monkeypatch.setattr(analysis, "ProcessPoolExecutor", Counted)
    assert warm(root, in_thread, EXTENSIONS, SKIP_DIRS, workers=1) == len(set(keys))
    assert pools == []
    assert warm(root, in_processes, EXTENSIONS, SKIP_DIRS, workers=2) == len(set(keys))
    assert pools == [2]
    assert in_processes.get_many(keys) == in_thread.get_many(keys) and len(in_thread.get_many(keys)) == len(set(keys))
    assert multiprocessing.active_children() == []           # the workers are gone when warm returns
    assert warm(root, in_processes, EXTENSIONS, SKIP_DIRS, workers=2) == 0


def test_stopping_the_warm_up_stops_its_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analysis, "PROCESS_MIN_BYTES", 1)
    monkeypatch.setattr(analysis, "TASK_BYTES", 1)             # one file per task
    root = tmp_path / "project"
    files = _project(root, 200)
    cache = ChunkCache(tmp_path / "cache.sqlite3")
    stop = threading.Event()
    stored = cache.put_packed

    def put_then_stop(entries: dict[str, bytes]) -> None:
        stored(entries)
        stop.set()                                            # the session ended after the first results

    monkeypatch.setattr(cache, "put_packed", put_then_stop)
    learnt = warm(root, cache, EXTENSIONS, SKIP_DIRS, stop, workers=2)
    assert 1 <= learnt <= 4 < len(files)                      # at most the tasks in flight (2 per worker)
    assert multiprocessing.active_children() == []


class _BrokenPool:
    """A process pool whose workers die on their second task (as under the OOM killer)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.submitted = 0

    def submit(self, fn: Any, *args: Any) -> Future[bytes]:
        self.submitted += 1
        future: Future[bytes] = Future()
        if self.submitted == 1:
            future.set_result(fn(*args))
        else:
            future.set_exception(BrokenProcessPool("a worker died"))
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


class _NoSemaphores:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("this platform lacks a functioning sem_open implementation")


@pytest.mark.parametrize("pool", [_BrokenPool, _NoSemaphores])
def test_workers_that_die_or_cannot_start_leave_their_work_to_the_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pool: type) -> None:
    monkeypatch.setattr(analysis, "PROCESS_MIN_BYTES", 1)
    monkeypatch.setattr(analysis, "TASK_BYTES", 300)
    root = tmp_path / "project"
    files = _project(root, 30)
    keys = [cache_key(p, _sha(t)) for p, t in files.items()]
    expected = ChunkCache(tmp_path / "thread.sqlite3")
    warm(root, expected, EXTENSIONS, SKIP_DIRS, workers=1)
    monkeypatch.setattr(analysis, "ProcessPoolExecutor", pool)
    cache = ChunkCache(tmp_path / "cache.sqlite3")
    assert warm(root, cache, EXTENSIONS, SKIP_DIRS, workers=2) >= len(set(keys))
    assert cache.get_many(keys) == expected.get_many(keys) and len(cache.get_many(keys)) == len(set(keys))


def test_warm_ups_started_together_analyse_each_file_once(tmp_path: Path) -> None:
    root = tmp_path / "project"
    files = _project(root, 60)
    cache = ChunkCache(tmp_path / "cache.sqlite3")
    learnt: list[int] = []
    threads = [threading.Thread(target=lambda: learnt.append(warm(root, cache, EXTENSIONS, SKIP_DIRS, workers=1)))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(learnt) == [0, 0, 0, len(set(_fps(files).values()))]


def test_a_stopped_warm_up_does_not_wait_for_another_one(tmp_path: Path) -> None:
    root = tmp_path / "project"
    _project(root, 5)
    stop = threading.Event()
    stop.set()
    with prewarm._WARMING:                                    # another session's warm-up under way
        assert warm(root, ChunkCache(tmp_path / "cache.sqlite3"), EXTENSIONS, SKIP_DIRS, stop) == 0

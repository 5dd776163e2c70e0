"""The host cache of file analyses behind find_code's index: same index with or without it, only unseen
content fetched, and a broken cache never breaks a query. Real SQLite files."""

from __future__ import annotations

import hashlib
import marshal
import os
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from harness.tools.retrieval import analysis, chunk_cache, code_index, prewarm
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


def _spy_workers(monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen[bytes]]:
    started: list[subprocess.Popen[bytes]] = []
    start = analysis._start_worker

    def spied() -> subprocess.Popen[bytes]:
        started.append(start())
        return started[-1]

    monkeypatch.setattr(analysis, "_start_worker", spied)
    return started


def test_a_large_tree_is_analysed_by_worker_processes_exactly_as_in_the_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analysis, "PROCESS_MIN_BYTES", 1)      # any tree is "large"
    monkeypatch.setattr(analysis, "TASK_BYTES", 200)           # a few files per task: many tasks
    root = tmp_path / "project"
    files = _project(root, 40)
    keys = [cache_key(p, _sha(t)) for p, t in files.items()]
    in_thread, in_processes = ChunkCache(tmp_path / "thread.sqlite3"), ChunkCache(tmp_path / "procs.sqlite3")
    started = _spy_workers(monkeypatch)
    assert warm(root, in_thread, EXTENSIONS, SKIP_DIRS, workers=1) == len(set(keys))
    assert started == []
    assert warm(root, in_processes, EXTENSIONS, SKIP_DIRS, workers=2) == len(set(keys))
    assert len(started) == 2
    assert in_processes.get_many(keys) == in_thread.get_many(keys) and len(in_thread.get_many(keys)) == len(set(keys))
    assert all(worker.returncode is not None for worker in started)     # gone when warm returns
    assert warm(root, in_processes, EXTENSIONS, SKIP_DIRS, workers=2) == 0


def test_stopping_the_warm_up_stops_its_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analysis, "PROCESS_MIN_BYTES", 1)
    monkeypatch.setattr(analysis, "TASK_BYTES", 1)             # one file per task
    root = tmp_path / "project"
    files = _project(root, 200)
    cache = ChunkCache(tmp_path / "cache.sqlite3")
    started = _spy_workers(monkeypatch)
    stop = threading.Event()
    stored = cache.put_packed

    def put_then_stop(entries: dict[str, bytes]) -> None:
        stored(entries)
        stop.set()                                            # the session ended after the first results

    monkeypatch.setattr(cache, "put_packed", put_then_stop)
    learnt = warm(root, cache, EXTENSIONS, SKIP_DIRS, stop, workers=2)
    assert learnt == 1 < len(files)                           # the first answer; the other worker's is dropped
    assert len(started) == 2 and all(worker.returncode is not None for worker in started)


ONE_TASK_THEN_EXIT = ("import marshal, sys; from harness.tools.retrieval import analysis as a; "
                      "t = a._read_frame(sys.stdin.buffer); r = a._analyse_packed(marshal.loads(t)); "
                      "sys.stdout.buffer.write(len(r).to_bytes(4, 'big') + r); sys.stdout.buffer.flush()")


@pytest.mark.parametrize("worker", ["exits after one task", "dies at once", "cannot start"])
def test_workers_that_die_or_cannot_start_leave_their_work_to_the_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, worker: str) -> None:
    monkeypatch.setattr(analysis, "PROCESS_MIN_BYTES", 1)
    monkeypatch.setattr(analysis, "TASK_BYTES", 300)
    root = tmp_path / "project"
    files = _project(root, 30)
    keys = [cache_key(p, _sha(t)) for p, t in files.items()]
    expected = ChunkCache(tmp_path / "thread.sqlite3")
    warm(root, expected, EXTENSIONS, SKIP_DIRS, workers=1)
    started = _spy_workers(monkeypatch)
    if worker == "cannot start":
        monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    else:
        monkeypatch.setattr(analysis, "WORKER_CODE", ONE_TASK_THEN_EXIT if worker == "exits after one task"
                            else "raise SystemExit(3)")
    cache = ChunkCache(tmp_path / "cache.sqlite3")
    assert warm(root, cache, EXTENSIONS, SKIP_DIRS, workers=2) == len(set(keys))
    assert cache.get_many(keys) == expected.get_many(keys) and len(cache.get_many(keys)) == len(set(keys))
    assert all(w.returncode is not None for w in started) and len(started) == (0 if worker == "cannot start" else 2)


def test_a_library_script_without_a_main_guard_runs_once(tmp_path: Path) -> None:
    """The workers never run the caller's main script again (as multiprocessing's spawn would)."""
    root = tmp_path / "project"
    files = _project(root, 30)
    ran = tmp_path / "ran.txt"
    script = tmp_path / "script.py"
    script.write_text(
        "from pathlib import Path\n"
        "from harness.tools.retrieval import analysis\n"
        "from harness.tools.retrieval.chunk_cache import ChunkCache\n"
        "from harness.tools.retrieval.find_code import EXTENSIONS, SKIP_DIRS\n"
        "from harness.tools.retrieval.prewarm import warm\n"
        f"with open({str(ran)!r}, 'a') as f:\n    f.write('ran\\n')\n"
        "analysis.PROCESS_MIN_BYTES = 1\n"
        "analysis.TASK_BYTES = 300\n"
        "started = []\n"
        "start = analysis._start_worker\n"
        "analysis._start_worker = lambda: started.append(start()) or started[-1]\n"
        f"print(warm(Path({str(root)!r}), ChunkCache(Path({str(tmp_path / 'c.sqlite3')!r})), EXTENSIONS, SKIP_DIRS,"
        " workers=2), len(started))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(len(set(_fps(files).values()))), "2"] and ran.read_text() == "ran\n"


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


def test_known_lists_present_entries_of_this_version_without_loading_them(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cache = ChunkCache(tmp_path / "cache.sqlite3")
    cache.put_many({"a": [(1, 1, "lines", "", "a", {"a": 1})], "b": [(1, 1, "lines", "", "b", {"b": 1})]})
    db = sqlite3.connect(tmp_path / "cache.sqlite3")
    db.execute("INSERT INTO chunks (key, version, used, data) VALUES ('old', ?, 0, ?)",
               [chunk_cache.VERSION - 1, marshal.dumps([])])
    db.commit()
    db.close()
    loads: list[bytes] = []
    monkeypatch.setattr(chunk_cache, "_load", lambda data: loads.append(data))
    assert cache.known(["a", "b", "old", "missing", "a"]) == {"a", "b"}
    assert loads == []


def test_warming_a_tree_the_cache_has_seen_reads_no_analysis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "project"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    cache = ChunkCache(tmp_path / "cache.sqlite3")
    assert warm(root, cache, EXTENSIONS, SKIP_DIRS) == 3          # cart.py's copy shares its content
    monkeypatch.setattr(ChunkCache, "get_many", lambda *a: pytest.fail("warming loaded analyses"))
    assert warm(root, cache, EXTENSIONS, SKIP_DIRS) == 0


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


@pytest.mark.parametrize("cached", [False, True], ids=["empty cache", "cache has seen the tree"])
def test_the_warm_up_builds_the_sessions_index_and_the_first_query_reindexes_only_what_differs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cached: bool) -> None:
    monkeypatch.setattr(analysis, "PROCESS_MIN_BYTES", 1)       # worker processes, as on a large tree
    monkeypatch.setattr(analysis, "TASK_BYTES", 300)
    monkeypatch.setattr(prewarm, "BATCH", 7)                    # cached analyses loaded in several batches
    root = tmp_path / "project"
    files = _project(root, 30)
    cache = ChunkCache(tmp_path / "cache.sqlite3")
    if cached:
        warm(root, cache, EXTENSIONS, SKIP_DIRS, workers=1)
    index = CodeIndex(cache=cache)
    thread = start_warming(index, root, EXTENSIONS, SKIP_DIRS)
    assert thread is not None
    thread.join(60)
    assert {p: sha for p, (sha, _) in index.files.items()} == _fps(files)      # built before any query
    assert _shape(index) == _shape(_index(None, files, []))
    # the sandbox as the first query finds it: one file edited, one deleted, one new since the copy
    now = dict(files, **{"pkg/m3.py": "def renamed_step(value):\n    return value\n", "notes.md": "# notes\n"})
    del now["pkg/m4.py"]
    monkeypatch.setattr(ChunkCache, "get_many", lambda self, keys: {})   # nothing more comes from the cache
    fetched: list[str] = []

    def fetch(paths: list[str]) -> dict[str, str]:
        fetched.extend(paths)
        return {p: now[p] for p in paths}

    report = index.sync(_fps(now), fetch)
    assert sorted(fetched) == ["notes.md", "pkg/m3.py"] and (report.added, report.changed, report.removed) == (1, 1, 1)
    assert _shape(index) == _shape(_index(None, now, []))
    assert [c.name for c, _ in index.search("renamed step", 1)] == ["renamed_step"]


def test_a_warm_up_that_outlives_the_first_query_adds_nothing_to_the_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "project"
    _write(root, FILES)
    index = CodeIndex(cache=ChunkCache(tmp_path / "cache.sqlite3"))
    monkeypatch.setattr(code_index, "WARM_WAIT", 0.05)
    with prewarm._WARMING:                                    # another session's warm-up holds this one back
        thread = start_warming(index, root, EXTENSIONS, SKIP_DIRS)
        assert thread is not None
        sandbox = dict(FILES, **{"shop/cart.py": "def checkout(cart):\n    return cart\n"})
        index.sync(_fps(sandbox), lambda paths: {p: sandbox[p] for p in paths})     # gave up waiting
    thread.join(60)                                           # it analysed the host's copy after all
    assert not thread.is_alive() and not index.adopt([("x.py", "0" * 64, [])])
    assert _shape(index) == _shape(_index(None, sandbox, []))      # the sandbox's files, not the host's


def test_the_listing_follows_no_link_and_skips_what_find_code_skips(tmp_path: Path) -> None:
    root = tmp_path / "project"
    _write(root, {"a/x.py": "x = 1\n", "a/b.txt": "b\n", "pkg.egg-info/PKG-INFO.txt": "skip\n",
                  ".git/config.txt": "skip\n", "a/__pycache__/x.txt": "skip\n", "a/image.png": "skip\n"})
    outside = tmp_path / "outside"
    _write(outside, {"secret.py": "TOKEN = 1\n"})
    (root / "linked").symlink_to(outside, target_is_directory=True)
    (root / "a" / "link.py").symlink_to(outside / "secret.py")
    (root / "a" / "dangling.py").symlink_to(tmp_path / "missing.py")
    os.mkfifo(root / "a" / "pipe.py")
    listed = prewarm._listing(str(root), EXTENSIONS, SKIP_DIRS)
    assert [(rel, size) for _, rel, size in listed] == [("a/b.txt", 2), ("a/x.py", 6)]
    assert [p.relative_to(root).as_posix() for p in indexable(root, EXTENSIONS, SKIP_DIRS)] == ["a/b.txt", "a/x.py"]


def test_an_analysis_worker_starts_without_the_tool_catalog() -> None:
    """A worker imports the analysis alone: the catalog and its JSON Schema validator took 170 ms of each
    worker's start, beside the sandbox's."""
    code = ("import sys; from harness.tools.retrieval.analysis import worker_main; "
            "print(sorted(m for m in sys.modules if m.startswith(('jsonschema', 'harness.tools.catalog', "
            "'harness.tools.base', 'sqlite3')))); "
            "from harness.tools import Catalog, ToolContext; print(Catalog.__name__, ToolContext.__module__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split("\n")[:2] == ["[]", "Catalog harness.tools.base"]   # the names still import on use

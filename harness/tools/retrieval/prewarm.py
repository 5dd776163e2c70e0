"""Analysing a project's files for `find_code` while the session starts, from the host's copy.

At the start of a session /workspace holds exactly the files of the task's folder on the host, so
their analyses (chunks and term counts, `harness.tools.retrieval.chunk_cache`) can be made from that
folder in a background thread, with no sandbox I/O, while the sandbox starts and the model reads the
task. A large tree is analysed by worker processes (`analysis.analyse_many`); the thread reads,
hashes and stores. A session's warm-up also builds its index as the analyses come (those in the cache
loaded, new ones as the workers answer; `CodeIndex.adopt`), so the first `find_code` lists the
fingerprints in the sandbox (one command) and only re-indexes the files that differ from the host's:
on a django-sized tree, loading 3,931 analyses from the cache and indexing them after the warm-up
had taken 0.4 s of that query. Files the agent changed meanwhile are simply re-indexed by the query.
Once the analyses are in, the dense half (if the index has one) starts building from the same files
(`DenseIndex.start`, in its own thread: the first query waits for the analysis, never for it).
"""

from __future__ import annotations

import hashlib
import marshal
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from harness.tools.retrieval.analysis import Item, analyse_many, cache_key
from harness.tools.retrieval.chunk_cache import Analysed, ChunkCache
from harness.tools.retrieval.code_index import CodeIndex

MAX_FILE_BYTES = 512 * 1024
BATCH = 400                       # analyses loaded from the cache at a time
# One warm-up at a time in a process: each uses every core already, and sessions of one repository
# started together (`harness eval --workers N`) then find what the first one analysed in the cache
# instead of analysing the same files side by side.
_WARMING = threading.Lock()


def indexable(root: Path, extensions: tuple[str, ...], skip_dirs: tuple[str, ...]) -> list[Path]:
    """The files under `root` find_code indexes (the same rule as its `find` command; links not followed)."""
    return [Path(path) for path, _, _ in _listing(str(root), extensions, skip_dirs)]


def _listing(root: str, extensions: tuple[str, ...], skip_dirs: tuple[str, ...]) -> list[tuple[str, str, int]]:
    """(path, path relative to `root`, size) of each file `indexable` lists: regular files (no link is
    followed, to a file or a folder) with an indexed extension, under the size limit, outside the
    skipped folders. One `scandir` per folder and one `lstat` per candidate file (a third of the
    system calls of `os.walk` and `Path` tests, which took 0.12 s on a django tree beside the
    sandbox's start)."""
    suffixes = tuple(f".{e}" for e in extensions)
    found: list[tuple[str, str, int]] = []
    folders = [(root, "")]
    while folders:
        folder, rel = folders.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        below: list[tuple[str, str]] = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in skip_dirs and not entry.name.endswith(".egg-info"):
                        below.append((entry.path, f"{rel}{entry.name}/"))
                elif entry.name.endswith(suffixes) and entry.is_file(follow_symlinks=False):
                    size = entry.stat(follow_symlinks=False).st_size
                    if size < MAX_FILE_BYTES:
                        found.append((entry.path, rel + entry.name, size))
            except OSError:
                continue
        folders.extend(reversed(below))
    return found


def warm(root: Path, cache: ChunkCache, extensions: tuple[str, ...], skip_dirs: tuple[str, ...],
         stop: threading.Event | None = None, workers: int | None = None, into: CodeIndex | None = None) -> int:
    """Put the analysis of every indexable file under `root` into `cache`; returns how many were new.

    Every file is read and hashed first and the cache asked which contents it knows; the rest is
    then analysed, in worker processes for a large tree (`analysis.analyse_many`; `workers` as there),
    started at once. With `into`, every file is also indexed there with the analysis of its content
    as it is known (`CodeIndex.adopt`, until the index's first sync): those of the cache are loaded
    by a second thread while the new ones are analysed."""
    stop = stop or threading.Event()
    while not _WARMING.acquire(timeout=0.2):
        if stop.is_set():
            return 0
    try:
        files = _listing(str(root), extensions, skip_dirs)
        keys: dict[str, tuple[str, str]] = {}           # cache key -> (path, relative path): one per content
        sizes: dict[str, int] = {}
        target = _Into(into) if into is not None else None
        for path, rel, _ in files:
            if stop.is_set():
                return 0
            data = _read(path)
            if data is None:
                continue
            sha = hashlib.sha256(data).hexdigest()
            key = cache_key(rel, sha)
            keys.setdefault(key, (path, rel))
            sizes[key] = len(data)
            if target is not None:
                target.place(key, rel, sha)
        known = cache.known(keys)
        new = [key for key in keys if key not in known]
        loader = None
        if target is not None and known:
            loader = threading.Thread(target=target.load, args=(cache, [k for k in keys if k in known], stop),
                                      name="find-code-load", daemon=True)
            loader.start()
        try:
            sink = cache.put_packed if target is None else target.storing(cache)
            return analyse_many(_contents(new, keys, stop), sink, stop, workers, size=sum(sizes[k] for k in new))
        finally:
            if loader is not None:
                loader.join()
    finally:
        _WARMING.release()


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_FILE_BYTES)
    except OSError:
        return None


def _contents(new: list[str], keys: Mapping[str, tuple[str, str]], stop: threading.Event) -> Iterator[Item]:
    """(key, relative path, content) of each new content, read again when it is analysed (bounded
    memory; it is in the page cache from the hashing). A file that changed since is left out: the
    cache holds analyses by content, and the first query indexes what the sandbox holds."""
    for key in new:
        if stop.is_set():
            return
        path, rel = keys[key]
        data = _read(path)
        if data is not None and cache_key(rel, hashlib.sha256(data).hexdigest()) == key:
            yield key, rel, data


class _Into:
    """Hands a warm-up's analyses to a session's index, for every path holding that content (the
    warm-up analyses each content once). Fed by the analysing thread and the loading one."""

    def __init__(self, index: CodeIndex) -> None:
        self.index = index
        self.waiting: dict[str, list[tuple[str, str]]] = {}    # cache key -> (path, sha256) to index with it
        self.lock = threading.Lock()

    def place(self, key: str, rel: str, sha: str) -> None:
        self.waiting.setdefault(key, []).append((rel, sha))

    def adopt(self, found: Mapping[str, Analysed]) -> None:
        with self.lock:
            files = [(rel, sha, analysed) for key, analysed in found.items()
                     for rel, sha in self.waiting.pop(key, [])]
        self.index.adopt(files)

    def load(self, cache: ChunkCache, keys: list[str], stop: threading.Event) -> None:
        """The cache's analyses of `keys`, into the index, a batch at a time (what fails to load, the
        first query indexes itself)."""
        try:
            for i in range(0, len(keys), BATCH):
                if stop.is_set():
                    return
                self.adopt(cache.get_many(keys[i:i + BATCH]))
        except Exception:  # noqa: BLE001 - warming is an optimisation, and this thread has no one to tell
            pass

    def storing(self, cache: ChunkCache) -> Callable[[Mapping[str, bytes]], None]:
        """The sink of new analyses: into the cache, then into the index."""
        def sink(fresh: Mapping[str, bytes]) -> None:
            cache.put_packed(fresh)
            self.adopt({key: marshal.loads(data) for key, data in fresh.items()})
        return sink


def start_warming(index: CodeIndex, root: Path | None, extensions: tuple[str, ...],
                  skip_dirs: tuple[str, ...]) -> threading.Thread | None:
    """Warm `index`'s cache from `root` in a daemon thread; `index.sync` waits for it (bounded)."""
    if index.cache is None or root is None or not Path(root).is_dir():
        return None
    cache = index.cache

    def run() -> None:
        try:
            warm(Path(root), cache, extensions, skip_dirs, index.stop_warming, into=index)
        except Exception:  # noqa: BLE001 - warming is an optimisation: find_code analyses what is missing
            pass
        if index.dense is not None and not index.stop_warming.is_set():   # then the dense half, from the same files
            on_host = {rel: path for path, rel, _ in _listing(str(root), extensions, skip_dirs)}
            index.dense.start(index, {}, None, on_host=on_host, after_first_answer=True)

    thread = threading.Thread(target=run, name="find-code-warm", daemon=True)
    index.warming = thread
    thread.start()
    return thread

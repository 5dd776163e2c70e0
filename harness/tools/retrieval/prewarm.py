"""Analysing a project's files for `find_code` while the session starts, from the host's copy.

At the start of a session /workspace holds exactly the files of the task's folder on the host, so
their analyses (chunks and term counts, `harness.tools.retrieval.chunk_cache`) can be made from that
folder in a background thread, with no sandbox I/O, while the sandbox starts and the model reads the
task. The first `find_code` then lists the fingerprints in the sandbox (one command), finds every
file in the cache, and only builds the postings. Files the agent changed meanwhile are simply cache
misses. A large tree is analysed by worker processes (`analysis.analyse_many`); the thread reads,
hashes and stores.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from harness.tools.retrieval.analysis import Item, analyse_many, cache_key
from harness.tools.retrieval.chunk_cache import ChunkCache
from harness.tools.retrieval.code_index import CodeIndex

MAX_FILE_BYTES = 512 * 1024
BATCH = 400                       # files read, hashed and looked up in the cache at a time
# One warm-up at a time in a process: each uses every core already, and sessions of one repository
# started together (`harness eval --workers N`) then find what the first one analysed in the cache
# instead of analysing the same files side by side.
_WARMING = threading.Lock()


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
    A large tree is analysed in worker processes (`analysis.analyse_many`; `workers` as there)."""
    stop = stop or threading.Event()
    while not _WARMING.acquire(timeout=0.2):
        if stop.is_set():
            return 0
    try:
        return analyse_many(_uncached(root, cache, extensions, skip_dirs, stop), cache.put_packed, stop, workers)
    finally:
        _WARMING.release()


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
        known = cache.known(contents)
        yield from ((key, rel, data) for key, (rel, data) in contents.items() if key not in known)


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

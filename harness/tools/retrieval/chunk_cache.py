"""What `find_code` learnt about a file, kept on the host by the file's content, across sessions.

Cutting a file into chunks and counting their terms is the cost of building the index (an AST per
Python file, millions of identifiers on a django-sized tree). The result depends only on the file's
text and whether it is Python, so it is stored under (SHA-256, kind) in one SQLite database in the
harness's cache folder, shared by every session and process on the machine: the next session of
the same tree, or of another commit of the same repository, fetches and analyses only the files it
has not seen. Entries are `marshal` data of plain tuples (never pickle: nothing in them runs).

The dense half's vectors (`embedding.py`) are kept in the same database, table `vectors`, by the
hash of the text the model read (`embedding.vector_key`: the model's name in it), as float16 bytes:
a chunk unchanged since another commit or session is not embedded again.

A cache that cannot be read or written is skipped, never an error: `find_code` then analyses the files
itself. `VERSION` changes whenever chunking or terms change, so old entries are never used.
"""

from __future__ import annotations

import marshal
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from harness import checks
from harness.core.sources import cache_dir
from harness.core.sqlite import use_wal

VERSION = 4                 # 2: a chunk's first line kept instead of its text; 3: the outline read from the lines;
                            # 4: each chunk's vector key
MAX_ROWS = 400_000          # a few hundred trees of a large repository; the least recently used go first
MAX_VECTORS = 1_000_000     # 770 MB of float16 vectors at most (a django tree has 42,000)
BATCH = 500

Analysed = list[tuple[int, int, str, str, str, dict[str, int], str]]
"""A file's chunks, each (start, end, kind, name, first line, term counts of name, name and text, the key
of its vector: `embedding.vector_key` of what the model reads of it)."""


class ChunkCache:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._broken = False

    def _conn(self) -> sqlite3.Connection | None:
        if self._db is None and not self._broken:
            try:
                path = self.path or cache_dir() / "code-index.sqlite3"
                checks.private_dir(path.parent)
                db = sqlite3.connect(path, timeout=30.0, check_same_thread=False, isolation_level=None)
                use_wal(db)
                db.execute("CREATE TABLE IF NOT EXISTS chunks (key TEXT PRIMARY KEY, version INTEGER NOT NULL, "
                           "used REAL NOT NULL, data BLOB NOT NULL)")
                db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, used REAL NOT NULL, "
                           "data BLOB NOT NULL)")
                self._db = db
            except (sqlite3.Error, OSError):
                self._broken = True
        return self._db

    def get_many(self, keys: Iterable[str]) -> dict[str, Analysed]:
        """The cached analyses of `keys` that exist (a miss is simply absent)."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, Analysed] = {}
        with self._lock:
            db = self._conn()
            if db is None or not wanted:
                return found
            try:
                for key, data in _rows(db, "key, data", wanted):
                    value = _load(data)
                    if value is not None:
                        found[key] = value
                if found:     # marked as used, in one transaction (one per row took half a django tree's load)
                    now, keys = time.time(), list(found)
                    db.execute("BEGIN")
                    for i in range(0, len(keys), BATCH):
                        part = keys[i:i + BATCH]
                        db.execute(f"UPDATE chunks SET used = ? WHERE key IN ({','.join('?' * len(part))})",
                                   [now, *part])
                    db.execute("COMMIT")
            except sqlite3.Error:
                _rollback(db)
                return found
        return found

    def known(self, keys: Iterable[str]) -> set[str]:
        """Which of `keys` the cache holds, without reading their analyses (what warming asks: loading
        them all, as `get_many` does, took most of a warm-up on a tree seen before, beside the sandbox's
        start)."""
        wanted = list(dict.fromkeys(keys))
        found: set[str] = set()
        with self._lock:
            db = self._conn()
            if db is None or not wanted:
                return found
            try:
                found.update(key for (key,) in _rows(db, "key", wanted))
            except sqlite3.Error:
                return found
        return found

    def put_many(self, entries: Mapping[str, Analysed]) -> None:
        self.put_packed({k: marshal.dumps(v) for k, v in entries.items()})

    def put_packed(self, entries: Mapping[str, bytes]) -> None:
        """`put_many` of analyses already in `marshal` form (as worker processes send them)."""
        with self._lock:
            db = self._conn()
            if db is None or not entries:
                return
            now = time.time()
            try:
                db.execute("BEGIN")
                db.executemany("INSERT OR REPLACE INTO chunks (key, version, used, data) VALUES (?, ?, ?, ?)",
                               [(k, VERSION, now, v) for k, v in entries.items()])
                db.execute("DELETE FROM chunks WHERE version != ?", [VERSION])
                count = db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
                if count > MAX_ROWS:
                    db.execute("DELETE FROM chunks WHERE key IN (SELECT key FROM chunks ORDER BY used LIMIT ?)",
                               [count - MAX_ROWS])
                db.execute("COMMIT")
            except sqlite3.Error:
                _rollback(db)

    def get_vectors(self, keys: Iterable[str]) -> dict[str, bytes]:
        """The stored vectors of `keys` (float16 bytes) that exist."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, bytes] = {}
        with self._lock:
            db = self._conn()
            if db is None or not wanted:
                return found
            try:
                for i in range(0, len(wanted), BATCH):
                    part = wanted[i:i + BATCH]
                    found.update(db.execute(f"SELECT key, data FROM vectors WHERE key IN ({','.join('?' * len(part))})",
                                            part).fetchall())
            except sqlite3.Error:
                return found
        return found

    def put_vectors(self, entries: Mapping[str, bytes]) -> None:
        """Store vectors by key; beyond `MAX_VECTORS` the least recently stored go first."""
        with self._lock:
            db = self._conn()
            if db is None or not entries:
                return
            try:
                db.execute("BEGIN")
                db.executemany("INSERT OR REPLACE INTO vectors (key, used, data) VALUES (?, ?, ?)",
                               [(k, time.time(), v) for k, v in entries.items()])
                count = db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
                if count > MAX_VECTORS:
                    db.execute("DELETE FROM vectors WHERE key IN (SELECT key FROM vectors ORDER BY used LIMIT ?)",
                               [count - MAX_VECTORS])
                db.execute("COMMIT")
            except sqlite3.Error:
                _rollback(db)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def _rows(db: sqlite3.Connection, columns: str, keys: list[str]) -> Iterator[tuple[Any, ...]]:
    """`columns` of this version's entries among `keys`, `BATCH` keys a query."""
    for i in range(0, len(keys), BATCH):
        part = keys[i:i + BATCH]
        marks = ",".join("?" * len(part))
        yield from db.execute(f"SELECT {columns} FROM chunks WHERE version = ? AND key IN ({marks})",
                              [VERSION, *part]).fetchall()


def _rollback(db: sqlite3.Connection) -> None:
    try:
        if db.in_transaction:
            db.execute("ROLLBACK")
    except sqlite3.Error:
        pass


def _load(data: bytes) -> Analysed | None:
    try:
        value: Any = marshal.loads(data)
    except (ValueError, EOFError, TypeError):
        return None
    if not isinstance(value, list):
        return None
    return value


_SHARED: ChunkCache | None = None
_SHARED_LOCK = threading.Lock()


def shared_cache() -> ChunkCache:
    """The machine's cache (one connection per process, opened on first use)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = ChunkCache()
        return _SHARED

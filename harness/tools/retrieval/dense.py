"""The dense index of `find_code`: a vector per chunk of the `CodeIndex`'s source code (outside tests:
`chunks.dense_scope`), built in the background.

Every chunk's analysis carries the key of its vector (`chunks.vector_key` of what the model reads),
so the dense half needs no text to know what it lacks: the vectors it holds, those the cache
(`chunk_cache`, table `vectors`) holds, and the rest to embed. Embedding a django-sized tree takes
minutes of CPU here, so it never happens in a query's way: `prepare` says whether the dense half
can answer now; when it cannot, a builder thread loads what the cache has and embeds the rest (in
worker processes, `embedding.embed_many`) from texts it is given or fetches, and the query is
answered by BM25 alone, saying so. Only a handful of chunks (an edit) are embedded inline.

The session's warm-up (`prewarm.py`) starts the builder from the host's copy of the files as soon
as their analyses are in the index, so on a tree seen before the dense half is ready within a
second or two of the session's start.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.tools.retrieval.chunk_cache import ChunkCache
from harness.tools.retrieval.chunks import chunk_file, dense_scope, embed_text, vector_key
from harness.tools.retrieval.code_index import CodeIndex
from harness.tools.retrieval.embedding import DIM, QUERY_TOKENS, embed_many, shared_encoder

MAX_FILE_BYTES = 512 * 1024   # as find_code and the warm-up read
INLINE_CHUNKS = 16        # chunks a query embeds itself (an edit's); more go to the builder
Fetch = Callable[[list[str]], Mapping[str, str]]


@dataclass
class DenseIndex:
    cache: ChunkCache | None = None
    vectors: dict[str, bytes] = field(default_factory=dict)        # vector key -> float16 bytes
    building: threading.Thread | None = field(default=None, repr=False)
    stop: threading.Event = field(default_factory=threading.Event, repr=False)
    embedded: int = 0                     # chunks this index embedded itself (not found in the cache)
    workers: int | None = None            # embedding processes (None: one per core)
    build_seconds: float | None = None    # how long the last build in the background took
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _matrix: tuple[int, list[int], Any] | None = field(default=None, repr=False)   # (generation, ids, rows)
    _scope: tuple[int, dict[int, str]] | None = field(default=None, repr=False)   # (generation, scoped)

    def scoped(self, index: CodeIndex) -> dict[int, str]:
        """chunk id -> vector key of the chunks of `index` the dense half covers (`chunks.dense_scope`)."""
        with self._lock:
            memo = self._scope
            if memo is not None and memo[0] == index.generation:
                return memo[1]
        keys = dict(index.vector_keys)
        found = {cid: keys[cid] for path, (_, ids) in dict(index.files).items() if dense_scope(path)
                 for cid in ids if cid in keys}
        with self._lock:
            self._scope = (index.generation, found)
        return found

    def missing(self, index: CodeIndex) -> set[str]:
        """The keys of the covered chunks of `index` that have no vector here."""
        scoped = self.scoped(index)
        with self._lock:
            return {key for key in scoped.values() if key not in self.vectors}

    def add(self, found: Mapping[str, bytes]) -> None:
        with self._lock:
            self.vectors.update(found)

    def is_building(self) -> bool:
        return self.building is not None and self.building.is_alive()

    def prepare(self, index: CodeIndex, texts: Mapping[str, str], fetch: Fetch | None) -> str | None:
        """None if every chunk of `index` has its vector (a few missing ones are embedded now, from
        `texts`); otherwise starts the builder (if it is not running) and says how far it is."""
        if self.is_building():
            return self._progress(index)
        wanted = self.missing(index)
        if wanted and len(wanted) <= INLINE_CHUNKS:
            if self.cache is not None:
                self.add(self.cache.get_vectors(wanted))
                wanted = self.missing(index)
            files = set(_files_of(index, wanted)) if wanted else set()
            if wanted and files <= set(texts):
                self._from_texts({p: texts[p] for p in files}, wanted, workers=0)
                wanted = self.missing(index)
        if not wanted:
            return None
        self.start(index, dict(texts), fetch)
        return self._progress(index)

    def _progress(self, index: CodeIndex) -> str:
        scoped = self.scoped(index)
        with self._lock:
            done = sum(1 for key in scoped.values() if key in self.vectors)
        return f"the dense half is still being built ({done:,} of {len(scoped):,} chunks)"

    def start(self, index: CodeIndex, texts: Mapping[str, str], fetch: Fetch | None,
              on_host: Mapping[str, str] | None = None, after_first_answer: bool = False) -> threading.Thread:
        """Build in a daemon thread: the cache's vectors first, then the rest embedded from `texts`,
        the host's files `on_host` names (path -> the file on the host, as the warm-up listed them: no link
        followed), and what `fetch` returns. With `after_first_answer` (the session's warm-up), what the
        cache lacks is embedded only once the index's first query has been answered: its two worker
        processes had made a cold first answer up to 1.8 s slower than BM25 alone's."""
        with self._lock:
            if self.building is not None and self.building.is_alive():
                return self.building
            thread = threading.Thread(target=self._build_quietly, name="find-code-dense", daemon=True,
                                      args=(index, texts, fetch, on_host, after_first_answer))
            self.building = thread
            thread.start()
            return thread

    def _build_quietly(self, index: CodeIndex, texts: Mapping[str, str], fetch: Fetch | None,
                       on_host: Mapping[str, str] | None, after_first_answer: bool) -> None:
        started = time.monotonic()
        try:
            self.build(index, texts, fetch, on_host, after_first_answer)
            self.build_seconds = time.monotonic() - started
            if self.stop.is_set():     # the session has ended: no model to load (CodeIndex.stop waits for this thread)
                return
            shared_encoder().encode(["load the model"], QUERY_TOKENS)   # the first query's model, loaded
            self._rows(index)                                           # and its matrix
        except Exception:  # noqa: BLE001 - the builder has no one to tell: the next query starts it again
            pass

    def build(self, index: CodeIndex, texts: Mapping[str, str], fetch: Fetch | None = None,
              on_host: Mapping[str, str] | None = None, after_first_answer: bool = False) -> int:
        """Give every chunk of `index` its vector: from the cache, else embedded (from `texts`, files
        `on_host`, or `fetch`); returns how many were embedded."""
        wanted = self.missing(index)
        if self.cache is not None and wanted:
            found = self.cache.get_vectors(wanted)
            self.add(found)
            wanted -= set(found)
        if not wanted:
            return 0
        while after_first_answer and not (index.synced and not index.answering.is_set()) and not self.stop.is_set():
            time.sleep(0.05)
        files = _files_of(index, wanted)
        have = {p: t for p, t in texts.items() if p in files}
        if on_host is not None:
            have.update({p: t for p in files
                         if p not in have and p in on_host and (t := _read(on_host[p])) is not None})
        rest = [p for p in files if p not in have]
        if rest and fetch is not None and not self.stop.is_set():
            have.update(fetch(rest))
        return self._from_texts(have, wanted, self.workers, index.answering)

    def _from_texts(self, texts: Mapping[str, str], wanted: set[str], workers: int | None,
                    answering: threading.Event | None = None) -> int:
        """Embed the chunks of `texts` whose keys are `wanted`. The chunking is this thread's work (the
        embedding the workers'): it pauses while `answering` is set, so a query never shares the
        interpreter with it (a django tree's chunking, about a second, had slowed the first answer)."""
        items: dict[str, str] = {}
        for path, text in texts.items():
            while answering is not None and answering.is_set() and not self.stop.is_set():
                time.sleep(0.02)
            if not dense_scope(path):
                continue
            for chunk in chunk_file(path, text):
                read = embed_text(chunk.kind, chunk.name, chunk.text)
                key = vector_key(read)
                if key in wanted:
                    items.setdefault(key, read)
        done = embed_many(items.items(), self._store, self.stop, workers)
        self.embedded += done
        return done

    def _store(self, fresh: Mapping[str, bytes]) -> None:
        if self.cache is not None:
            self.cache.put_vectors(fresh)
        self.add(fresh)

    def search(self, index: CodeIndex, query: str, k: int) -> list[tuple[int, float]]:
        """The `k` chunk ids of `index` nearest to `query` (cosine similarity), best first."""
        np = _numpy()
        ids, rows = self._rows(index)
        if not ids:
            return []
        q = shared_encoder().encode([query], QUERY_TOKENS)[0]
        scores = rows @ q
        k = min(k, len(ids))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(ids[i], float(scores[i])) for i in top]

    def _rows(self, index: CodeIndex) -> tuple[list[int], Any]:
        """The matrix of `index`'s chunk vectors (float32), kept until the index changes."""
        np = _numpy()
        scoped = self.scoped(index)
        with self._lock:
            memo = self._matrix
            if memo is not None and memo[0] == index.generation:
                return memo[1], memo[2]
            pairs = [(cid, self.vectors[key]) for cid, key in scoped.items() if key in self.vectors]
            ids = [cid for cid, _ in pairs]
            rows = np.frombuffer(b"".join(v for _, v in pairs), dtype="<f2").reshape(len(ids), DIM).astype(np.float32)
            self._matrix = (index.generation, ids, rows)
            return ids, rows


def _files_of(index: CodeIndex, keys: set[str]) -> list[str]:
    """The covered paths of `index` holding a chunk whose vector key is among `keys`."""
    owners = dict(index.vector_keys)
    return sorted({path for path, (_, ids) in dict(index.files).items()
                   if dense_scope(path) and any(owners.get(c) in keys for c in ids)})


def _read(path: str) -> str | None:
    """The text of a host file the warm-up listed, never through a link (it may have become one since)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read(MAX_FILE_BYTES).decode("utf-8", "replace")


def _numpy() -> Any:
    # optional dependency (the retrieval extra): present whenever a DenseIndex is made
    import numpy  # noqa: PLC0415

    return numpy


def vector_keys_of(texts: Iterable[tuple[str, str]]) -> list[str]:
    """The vector keys of the chunks of (path, text) pairs, in order (for tests and benchmarks)."""
    return [vector_key(embed_text(c.kind, c.name, c.text)) for path, text in texts for c in chunk_file(path, text)]

"""An inverted index with BM25 ranking over code chunks, updated file by file.

Each file is indexed under its content fingerprint; `sync` takes the current fingerprints of all
files, drops the chunks of files that are gone or changed, and indexes the new versions, so a
query never returns code that no longer exists. Scoring is Okapi BM25 with k1 = 1.2, b = 0.75 and
the always-positive idf log(1 + (N - df + 0.5) / (df + 0.5)) used by Lucene.
"""

from __future__ import annotations

import heapq
import marshal
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from harness.tools.editing.lint import gc_paused
from harness.tools.retrieval.analysis import analyse, analyse_many, cache_key
from harness.tools.retrieval.chunk_cache import Analysed, ChunkCache
from harness.tools.retrieval.chunks import Chunk, term_counts, terms


class DenseHalf(Protocol):
    """What the index knows of its dense half (`dense.DenseIndex`): the warm-up starts its builder."""

    def start(self, index: CodeIndex, texts: Mapping[str, str], fetch: Callable[[list[str]], Mapping[str, str]] | None,
              on_host: Mapping[str, str] | None = None, after_first_answer: bool = False) -> threading.Thread: ...

    def is_building(self) -> bool: ...

    @property
    def building(self) -> threading.Thread | None: ...

K1, B = 1.2, 0.75
WARM_WAIT = 120.0    # seconds the first query waits for the session's prewarming before analysing itself
STOP_WAIT = 15.0     # seconds `CodeIndex.stop` waits for the warm-up and the dense builder to end


@dataclass(frozen=True)
class SyncReport:
    added: int
    changed: int
    removed: int


@dataclass
class CodeIndex:
    """A forward index (each chunk's term counts) with postings made per query term, on demand.

    Loading a project's analyses from the cache is then only unpacking them: building a full
    inverted index up front meant millions of dictionary inserts before the first query (1.4 M on
    django), while a query needs the postings of its few terms, one pass over the chunks each
    (memoised until the next change).
    """

    files: dict[str, tuple[str, list[int]]] = field(default_factory=dict)   # path -> (sha, chunk ids)
    chunks: dict[int, Chunk] = field(default_factory=dict)     # each one's `text`: its first line (analysis.preview)
    counts: dict[int, dict[str, int]] = field(default_factory=dict)      # chunk id -> its own term counts
    vector_keys: dict[int, str] = field(default_factory=dict)   # chunk id -> the key of its dense vector
    path_counts: dict[str, dict[str, int]] = field(default_factory=dict)  # path -> its path's term counts
    lengths: dict[int, int] = field(default_factory=dict)
    total_length: int = 0
    _next_id: int = 0
    _postings: dict[str, dict[int, int]] = field(default_factory=dict, repr=False)   # memo: term -> id -> tf
    cache: ChunkCache | None = None     # analyses of files by content, shared across sessions (None: none)
    warming: threading.Thread | None = field(default=None, repr=False)   # prewarm.start_warming's thread
    stop_warming: threading.Event = field(default_factory=threading.Event, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _adopting: bool = field(default=True, repr=False)    # until the first sync, the warm-up may add files
    generation: int = 0                  # changes whenever a file is added or removed
    fetched: dict[str, str] = field(default_factory=dict, repr=False)   # the texts the last sync fetched
    dense: DenseHalf | None = None       # the dense half (`find_code` makes it when it can run)
    answering: threading.Event = field(default_factory=threading.Event, repr=False)   # set while a query runs

    def stop(self, wait: float = STOP_WAIT) -> bool:
        """End the session's work on the index: the warm-up and the dense builder stop between batches,
        and this waits up to `wait` seconds for their threads; True if none is still running. A thread
        left inside onnxruntime when the interpreter exits aborts the process ("terminate called
        without an active exception", exit -6): the session's end waits for them."""
        self.stop_warming.set()
        deadline = time.monotonic() + wait
        for step in ("warming", "dense"):     # the warm-up may start the builder: asked once the warm-up has ended
            thread = self.warming if step == "warming" else self.dense.building if self.dense is not None else None
            if thread is not None and thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        warm = self.warming
        return not (warm is not None and warm.is_alive()) and not (self.dense is not None and self.dense.is_building())

    def adopt(self, files: Iterable[tuple[str, str, Analysed]]) -> bool:
        """Index (path, sha256, analysis) of files the session's warm-up analysed from the host's copy
        (`prewarm.warm`), before the first `sync`; once that has begun, refused (False): the index is the
        sandbox's from then on. What the warm-up indexes that the sandbox no longer holds, the first
        `sync` drops or re-indexes, as for any file that changed."""
        with self._lock:
            if not self._adopting:
                return False
            with gc_paused():
                for path, sha256, analysed in files:
                    self._add(path, sha256, analysed)
            return True

    @property
    def synced(self) -> bool:
        """Whether a query has brought the index to the sandbox's files (its first sync has begun)."""
        return not self._adopting

    def add_file(self, path: str, sha256: str, text: str) -> None:
        self._add(path, sha256, analyse(path, text))

    def _add(self, path: str, sha256: str, analysed: Analysed) -> None:
        self.remove_file(path)
        ids: list[int] = []
        own_path = term_counts(path)
        path_length = sum(own_path.values())
        self.path_counts[path] = own_path
        for start, end, kind, name, text, own, vkey in analysed:
            cid, self._next_id = self._next_id, self._next_id + 1
            self.chunks[cid] = Chunk(path, start, end, kind, name, text)
            self.counts[cid] = own
            self.vector_keys[cid] = vkey
            length = sum(own.values()) + path_length
            self.lengths[cid] = length
            self.total_length += length
            ids.append(cid)
        self.files[path] = (sha256, ids)
        self._postings.clear()
        self.generation += 1

    def remove_file(self, path: str) -> None:
        _, ids = self.files.pop(path, ("", []))
        for cid in ids:
            self.total_length -= self.lengths.pop(cid)
            del self.chunks[cid], self.counts[cid], self.vector_keys[cid]
        self.path_counts.pop(path, None)
        if ids:
            self._postings.clear()
            self.generation += 1

    def posting(self, term: str) -> dict[int, int]:
        """chunk id -> how often `term` occurs in the chunk (its path counted in), for chunks that have it.
        One pass over the chunks' counts, then the few paths that hold the term add it to their chunks."""
        found = self._postings.get(term)
        if found is None:
            found = {cid: tf for cid, own in self.counts.items() if (tf := own.get(term, 0))}
            for path, own in self.path_counts.items():
                extra = own.get(term, 0)
                if extra:
                    for cid in self.files[path][1]:
                        found[cid] = found.get(cid, 0) + extra
            self._postings[term] = found
        return found

    def vocabulary(self) -> set[str]:
        """Every term of the index (for tests and statistics; a query never needs it)."""
        words: set[str] = set()
        for own in self.counts.values():
            words.update(own)
        for own in self.path_counts.values():
            words.update(own)
        return words

    def sync(self, fingerprints: Mapping[str, str],
             fetch: Callable[[list[str]], Mapping[str, str]]) -> SyncReport:
        """Bring the index to `fingerprints` (path -> sha256); `fetch` returns texts of paths. Files whose
        content the cache has seen are neither fetched nor analysed again."""
        if self.warming is not None:     # the session's files are being analysed: those results are near
            self.warming.join(WARM_WAIT)
            self.warming = None
        with self._lock:                 # a warm-up still running (past WARM_WAIT) adds nothing from now on
            self._adopting = False
        gone = [p for p in self.files if p not in fingerprints]
        stale = [p for p, sha in fingerprints.items() if self.files.get(p, ("",))[0] != sha]
        changed = sum(1 for p in stale if p in self.files)
        for path in gone:
            self.remove_file(path)
        keys = {p: cache_key(p, fingerprints[p]) for p in stale}
        with gc_paused():       # hundreds of thousands of chunk objects, no cycles: a fifth of a load
            cached = self.cache.get_many(keys.values()) if self.cache is not None and stale else {}
            missing = sorted(p for p in stale if keys[p] not in cached)
        texts = fetch(missing) if missing else {}
        self.fetched = dict(texts)       # for the dense half, which embeds what it has no vector of
        work = {keys[p]: (keys[p], p, texts[p].encode("utf-8")) for p in missing if p in texts}
        learnt: dict[str, bytes] = {}      # analyses in marshal form (worker processes for a large tree)
        analyse_many(work.values(), learnt.update)
        with gc_paused():
            for path in stale:
                if keys[path] in cached:
                    self._add(path, fingerprints[path], cached[keys[path]])
                elif keys[path] in learnt:
                    self._add(path, fingerprints[path], marshal.loads(learnt[keys[path]]))
                else:
                    self.remove_file(path)
        if self.cache is not None and learnt:
            self.cache.put_packed(learnt)
        return SyncReport(added=len(stale) - changed, changed=changed, removed=len(gone))

    def search(self, query: str, k: int) -> list[tuple[Chunk, float]]:
        return [(self.chunks[cid], score) for cid, score in self.search_ids(query, k)]

    def search_ids(self, query: str, k: int) -> list[tuple[int, float]]:
        """The ids of the `k` best chunks by BM25, with their scores, best first."""
        n = len(self.chunks)
        if n == 0:
            return []
        avg = self.total_length / n
        scores: dict[int, float] = {}
        for term in set(terms(query)):
            posting = self.posting(term)
            if not posting:
                continue
            idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
            for cid, tf in posting.items():
                norm = K1 * (1 - B + B * self.lengths[cid] / avg)
                scores[cid] = scores.get(cid, 0.0) + idf * tf * (K1 + 1) / (tf + norm)
        if not scores:
            return []
        # the k best, ties broken by place: only the scores at least the k-th best are sorted (a full
        # sort of every chunk that matched a word took a third of a query on a django tree)
        floor = heapq.nlargest(k, scores.values())[-1]
        best = sorted(((cid, score) for cid, score in scores.items() if score >= floor),
                      key=lambda item: (-item[1], self.chunks[item[0]].path, self.chunks[item[0]].start))[:k]
        return best


def rank_files(hits: Iterable[tuple[Chunk, float]]) -> list[str]:
    """Files in the order their first chunk appears in `hits`."""
    seen: list[str] = []
    for chunk, _ in hits:
        if chunk.path not in seen:
            seen.append(chunk.path)
    return seen

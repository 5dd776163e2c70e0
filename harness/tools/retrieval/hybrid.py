"""`find_code`'s ranking: BM25 and the dense retriever, fused by reciprocal rank fusion, then an
optional re-read of the best candidates.

RRF(d) = sum over the retrievers of 1 / (c + rank(d)), c = 60 by default: it uses the ranks alone,
since a BM25 score and a cosine similarity are not on one scale. Each retriever gives its best
`POOL` chunks. The re-read (`rerank`) embeds the query and the whole text of each of the fused top
`RERANK_TOP` (the dense half reads a chunk's first 64 word pieces; here its first 256) and fuses
that order with the hybrid one. No package on PyPI ships the
weights of a cross-encoder, so this bi-encoder re-read is the reranker that runs here; it is off
by default (docs/tools.md: it did not pay for its time).
Each hit says which retrievers found it, and at which rank.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from harness.tools.retrieval.chunks import Chunk, embed_text
from harness.tools.retrieval.code_index import CodeIndex
from harness.tools.retrieval.dense import DenseIndex
from harness.tools.retrieval.embedding import QUERY_TOKENS, shared_encoder

POOL = 100           # candidates each retriever gives the fusion
RERANK_TOP = 10      # fused candidates the re-read orders again
K = TypeVar("K", bound=Hashable)
Texts = Callable[[list[Chunk]], list[str]]     # the whole text of each chunk (the index keeps a line)


@dataclass(frozen=True)
class Stages:
    bm25: bool = True
    dense: bool = True
    rerank: bool = False
    rrf_c: int = 60


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    score: float
    found_by: tuple[str, ...]      # e.g. ("bm25 #3", "dense #1")


def rrf(lists: Sequence[Sequence[K]], c: int = 60) -> list[tuple[K, float]]:
    """Reciprocal rank fusion of ranked lists (best first): each item's sum of 1 / (c + rank), ranks
    from 1; ties keep the order of first appearance (the earlier list, the better rank)."""
    scores: dict[K, float] = {}
    first: dict[K, tuple[int, int]] = {}
    for n, ranked in enumerate(lists):
        for rank, item in enumerate(ranked, 1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (c + rank)
            first.setdefault(item, (rank, n))
    return sorted(scores.items(), key=lambda kv: (-kv[1], first[kv[0]]))


def rank(index: CodeIndex, dense: DenseIndex | None, query: str, k: int, stages: Stages,
         texts: Texts | None = None) -> list[Hit]:
    """The `k` best chunks for `query` by the stages switched on (`dense` None: BM25 alone)."""
    lists: dict[str, list[int]] = {}
    scores: dict[int, float] = {}
    if stages.bm25 or dense is None or not stages.dense:
        hits = index.search_ids(query, POOL if dense is not None and stages.dense else max(k, RERANK_TOP))
        lists["bm25"] = [cid for cid, _ in hits]
        scores.update(hits)
    if dense is not None and stages.dense:
        found = dense.search(index, query, POOL)
        lists["dense"] = [cid for cid, _ in found]
        if not stages.bm25:
            scores.update(found)
    if len(lists) == 1:
        ranked = [(cid, scores[cid]) for cid in next(iter(lists.values()))]
    else:
        ranked = rrf(list(lists.values()), stages.rrf_c)
    if stages.rerank and texts is not None and ranked:
        ranked = _reread(index, query, ranked, texts, stages.rrf_c)
        lists["reread"] = [cid for cid, _ in ranked[:RERANK_TOP]]
    places = {name: {cid: n for n, cid in enumerate(ids, 1)} for name, ids in lists.items()}
    return [Hit(index.chunks[cid], score, tuple(f"{name} #{where[cid]}" for name, where in places.items()
                                                 if cid in where))
            for cid, score in ranked[:k]]


def _reread(index: CodeIndex, query: str, ranked: list[tuple[int, float]], texts: Texts,
            c: int) -> list[tuple[int, float]]:
    """The fused top `RERANK_TOP` ordered again by the cosine of the first 256 word pieces of their text
    (that order fused with the hybrid one), the rest after them as they were."""
    top = [cid for cid, _ in ranked[:RERANK_TOP]]
    bodies = texts([index.chunks[cid] for cid in top])
    windows = [(cid, embed_text(index.chunks[cid].kind, index.chunks[cid].name, body))
               for cid, body in zip(top, bodies, strict=True)]
    encoder = shared_encoder()
    q = encoder.encode([query], QUERY_TOKENS)[0]
    rows = encoder.encode([text for _, text in windows], QUERY_TOKENS)
    best = {cid: float(row @ q) for (cid, _), row in zip(windows, rows, strict=True)}
    reread = sorted(top, key=lambda cid: -best[cid])
    fused = rrf([top, reread], c)
    return fused + ranked[RERANK_TOP:]

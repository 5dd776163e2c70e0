"""`find_code`'s ranking: BM25 and the dense retriever, fused by reciprocal rank fusion, then an
optional re-read of the best candidates.

RRF(d) = sum over the retrievers of w / (c + rank(d)), c = 10 by default, w = 1 for BM25 and
`dense_weight` for the dense list: it uses the ranks alone, since a BM25 score and a cosine
similarity are not on one scale. Two fusions (`Stages.fusion`):

- "file" (the default): each retriever's file ranking (a file ranked by its best chunk) is fused, and
  the chunks are listed file by file in that order, `per_file` of each file at a time (0: all of a
  file's before the next file's). Within a file the order is BM25's (over its best `DEEP` chunks), then
  the chunks only the dense list found, in its order: the dense half moves the right file up without
  displacing BM25's right function inside it (docs/tools.md measures both fusions).
- "chunk": the chunks' own ranks fused.

Each retriever gives its best `POOL` chunks. The re-read (`rerank`) embeds the query and the whole text
of each of the fused top `RERANK_TOP` (the dense half reads a chunk's first 64 word pieces; here its
first 256) and fuses that order with the hybrid one. No package on PyPI ships the weights of a
cross-encoder, so this bi-encoder re-read is the reranker that runs here; it is off by default
(docs/tools.md: it did not pay for its time). Each hit says which retrievers found it, and at which rank.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from harness.tools.retrieval.chunks import Chunk, embed_text
from harness.tools.retrieval.code_index import CodeIndex
from harness.tools.retrieval.dense import DenseIndex
from harness.tools.retrieval.embedding import QUERY_TOKENS, shared_encoder

POOL = 100           # candidates each retriever gives the fusion
DEEP = 1000          # BM25's chunks read for the order within a file (file fusion)
RERANK_TOP = 10      # fused candidates the re-read orders again
K = TypeVar("K", bound=Hashable)
Texts = Callable[[list[Chunk]], list[str]]     # the whole text of each chunk (the index keeps a line)
Ranked = list[tuple[int, float]]               # chunk ids with their scores, best first
Fusion = Literal["slots", "file", "chunk"]


@dataclass(frozen=True)
class Stages:
    bm25: bool = True
    dense: bool = True
    rerank: bool = False
    rrf_c: int = 10            # ToolsConfig.find_code_rrf_c
    fusion: Fusion = "slots"
    per_file: int = 0          # file fusion: chunks of a file listed before the next file's (0: all)
    dense_weight: float = 1.0  # the dense list's weight in the fusion
    inside_dense: float = 0.0  # slots and file: the dense list's weight in the order within a file (0: BM25's)


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    score: float
    found_by: tuple[str, ...]      # e.g. ("bm25 #3", "dense #1")


def rrf(lists: Sequence[Sequence[K]], c: int = 60,
        weights: Sequence[float] | None = None) -> list[tuple[K, float]]:
    """Reciprocal rank fusion of ranked lists (best first): each item's sum of w / (c + rank), ranks
    from 1, w the list's weight (1 if not given); ties keep the order of first appearance (the earlier
    list, the better rank)."""
    scores: dict[K, float] = {}
    first: dict[K, tuple[int, int]] = {}
    for n, ranked in enumerate(lists):
        weight = 1.0 if weights is None else weights[n]
        for place, item in enumerate(ranked, 1):
            scores[item] = scores.get(item, 0.0) + weight / (c + place)
            first.setdefault(item, (place, n))
    return sorted(scores.items(), key=lambda kv: (-kv[1], first[kv[0]]))


def retrieve(index: CodeIndex, dense: DenseIndex | None, query: str, k: int, stages: Stages) -> dict[str, Ranked]:
    """Each retriever's list for `query` (name -> ranked chunk ids), by the stages switched on."""
    lists: dict[str, Ranked] = {}
    hybrid = dense is not None and stages.dense
    if stages.bm25 or not hybrid:
        depth = (DEEP if stages.fusion == "file" else POOL) if hybrid else max(k, RERANK_TOP)
        lists["bm25"] = index.search_ids(query, depth)
    if dense is not None and hybrid:
        lists["dense"] = dense.search(index, query, POOL)
    return lists


def fuse(index: CodeIndex, lists: dict[str, Ranked], stages: Stages) -> Ranked:
    """One ranking from the retrievers' `lists` (one list: its own order and scores)."""
    if len(lists) == 1:
        return list(next(iter(lists.values())))
    bm25, dense = [cid for cid, _ in lists["bm25"]], [cid for cid, _ in lists["dense"]]
    weights = (1.0, stages.dense_weight)
    if stages.fusion == "chunk":
        return rrf([bm25[:POOL], dense], stages.rrf_c, weights)
    if stages.fusion == "slots":
        fused = rrf([bm25[:POOL], dense], stages.rrf_c, weights)
        return _slots(index, fused, _inside(index, bm25, dense, stages))
    return _by_file(index, bm25, dense, stages, weights)


def _inside(index: CodeIndex, bm25: list[int], dense: list[int], stages: Stages) -> dict[str, list[int]]:
    """path -> its chunks in BM25's order, then those only the dense list holds, in its order; with
    `inside_dense`, the two orders within the file fused (the dense one by that weight)."""
    inside: dict[str, list[int]] = {}
    for cid in dict.fromkeys(bm25 + dense):
        inside.setdefault(index.chunks[cid].path, []).append(cid)
    if stages.inside_dense > 0:
        mine: dict[str, list[int]] = {}
        lexical_ids = set(bm25)
        for cid in dense:
            mine.setdefault(index.chunks[cid].path, []).append(cid)
        for path, ids in inside.items():
            lexical = [cid for cid in ids if cid in lexical_ids] if path in mine else ids
            inside[path] = [cid for cid, _ in rrf([lexical, mine.get(path, [])], stages.rrf_c,
                                                  (1.0, stages.inside_dense))]
    return inside


def _slots(index: CodeIndex, fused: Ranked, inside: dict[str, list[int]]) -> Ranked:
    """The chunk fusion's places kept file by file (so its file ranking), each file's places given to
    its chunks in the order of `inside`."""
    taken: dict[str, int] = {}
    out: Ranked = []
    for cid, score in fused:
        path = index.chunks[cid].path
        n = taken.get(path, 0)
        taken[path] = n + 1
        out.append((inside[path][n], score))
    return out


def _by_file(index: CodeIndex, bm25: list[int], dense: list[int], stages: Stages,
             weights: tuple[float, float]) -> Ranked:
    """The file fusion: files by the RRF of the two file rankings; within a file BM25's order, then
    the chunks only the dense list holds; `per_file` chunks of each file a round."""
    files = rrf([_files(index, bm25[:POOL]), _files(index, dense)], stages.rrf_c, weights)
    inside = _inside(index, bm25, dense, stages)
    if not inside:
        return []
    if stages.per_file <= 0:
        return [(cid, score) for path, score in files for cid in inside[path]]
    out: Ranked = []
    for start in range(0, max(len(ids) for ids in inside.values()), stages.per_file):
        out.extend((cid, score) for path, score in files for cid in inside[path][start:start + stages.per_file])
    return out


def _files(index: CodeIndex, ids: list[int]) -> list[str]:
    """Files in the order their best chunk appears in `ids`."""
    return list(dict.fromkeys(index.chunks[cid].path for cid in ids))


def rank(index: CodeIndex, dense: DenseIndex | None, query: str, k: int, stages: Stages,
         texts: Texts | None = None) -> list[Hit]:
    """The `k` best chunks for `query` by the stages switched on (`dense` None: BM25 alone)."""
    return hits_of(index, query, retrieve(index, dense, query, k, stages), k, stages, texts)


def hits_of(index: CodeIndex, query: str, lists: dict[str, Ranked], k: int, stages: Stages,
            texts: Texts | None = None) -> list[Hit]:
    """The `k` best chunks of the retrievers' `lists` (`retrieve`), fused and (if on) re-read."""
    ranked = fuse(index, lists, stages)
    places = {name: {cid: n for n, (cid, _) in enumerate(found[:POOL], 1)} for name, found in lists.items()}
    if stages.rerank and texts is not None and ranked:
        ranked = _reread(index, query, ranked, texts, stages.rrf_c)
        places["reread"] = {cid: n for n, (cid, _) in enumerate(ranked[:RERANK_TOP], 1)}
    return [Hit(index.chunks[cid], score, tuple(f"{name} #{where[cid]}" for name, where in places.items()
                                                 if cid in where))
            for cid, score in ranked[:k]]


def _reread(index: CodeIndex, query: str, ranked: Ranked, texts: Texts, c: int) -> Ranked:
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

"""The fusions of find_code's two lists (`hybrid.fuse`), on given lists: no model needed."""

from __future__ import annotations

import hashlib

import pytest

from harness.config import ToolsConfig
from harness.errors import ConfigError
from harness.tools.retrieval.code_index import CodeIndex
from harness.tools.retrieval.hybrid import Stages, fuse

FILES = {
    "a.py": "def alpha_one():\n    return 1\n\n\ndef alpha_two():\n    return 2\n",
    "b.py": "def beta():\n    return 3\n",
}


def _index() -> tuple[CodeIndex, dict[str, int]]:
    index = CodeIndex()
    index.sync({p: hashlib.sha256(t.encode()).hexdigest() for p, t in FILES.items()},
               lambda paths: {p: FILES[p] for p in paths})
    return index, {c.name: cid for cid, c in index.chunks.items() if c.name}


def _names(index: CodeIndex, ranked: list[tuple[int, float]]) -> list[str]:
    return [index.chunks[cid].name for cid, _ in ranked]


def test_slots_keep_the_chunk_fusions_file_order_and_give_each_file_bm25s_order() -> None:
    index, ids = _index()
    # BM25 ranks alpha_one first; the dense list likes alpha_two: the chunk fusion puts alpha_two first
    lists = {"bm25": [(ids["alpha_one"], 9.0), (ids["beta"], 5.0), (ids["alpha_two"], 1.0)],
             "dense": [(ids["alpha_two"], 0.9), (ids["beta"], 0.5)]}
    chunk = fuse(index, lists, Stages(fusion="chunk"))
    assert _names(index, chunk) == ["alpha_two", "beta", "alpha_one"]
    slots = fuse(index, lists, Stages(fusion="slots"))
    assert _names(index, slots) == ["alpha_one", "beta", "alpha_two"]     # a.py's places, BM25's order
    assert [score for _, score in slots] == [score for _, score in chunk]
    assert _names(index, fuse(index, lists, Stages())) == _names(index, slots)     # slots by default


def test_the_file_fusion_lists_files_by_their_fused_rank_and_per_file_chunks_a_round() -> None:
    index, ids = _index()
    lists = {"bm25": [(ids["alpha_one"], 9.0), (ids["beta"], 5.0), (ids["alpha_two"], 1.0)],
             "dense": [(ids["beta"], 0.9), (ids["alpha_two"], 0.5)]}
    # a.py: 1/61 + 1/62 against b.py's 1/62 + 1/61: a tie, kept in the order of first appearance
    assert _names(index, fuse(index, lists, Stages(fusion="file"))) == ["alpha_one", "alpha_two", "beta"]
    assert _names(index, fuse(index, lists, Stages(fusion="file", per_file=1))) == ["alpha_one", "beta", "alpha_two"]
    # a lower weight of the dense list: b.py, dense's first, no longer ties with a.py
    weighted = fuse(index, lists, Stages(fusion="file", dense_weight=0.5, rrf_c=60))
    assert _names(index, weighted) == ["alpha_one", "alpha_two", "beta"]
    assert weighted[0][1] == pytest.approx(1 / 61 + 0.5 / 62)


def test_a_chunk_only_the_dense_list_found_comes_after_bm25s_in_its_file() -> None:
    index, ids = _index()
    lists = {"bm25": [(ids["beta"], 3.0), (ids["alpha_two"], 2.0)],
             "dense": [(ids["alpha_one"], 0.9), (ids["beta"], 0.8)]}
    assert _names(index, fuse(index, lists, Stages(fusion="chunk"))) == ["beta", "alpha_one", "alpha_two"]
    assert _names(index, fuse(index, lists, Stages(fusion="slots"))) == ["beta", "alpha_two", "alpha_one"]
    assert fuse(index, {"bm25": [], "dense": []}, Stages(fusion="file", per_file=1)) == []


def test_an_unknown_fusion_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="find_code_fusion must be one of slots, file, chunk, got 'files'"):
        ToolsConfig(find_code_fusion="files")
    assert ToolsConfig().find_code_fusion == "slots"

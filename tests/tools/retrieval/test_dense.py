"""The dense half of find_code with the real model (the retrieval extra), RRF, the vector cache, and
the answer while the dense half is still being built."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config import ToolsConfig
from harness.errors import ConfigError
from harness.tools.retrieval import dense as dense_module
from harness.tools.retrieval import embedding
from harness.tools.retrieval.chunk_cache import ChunkCache
from harness.tools.retrieval.code_index import CodeIndex
from harness.tools.retrieval.dense import DenseIndex
from harness.tools.retrieval.find_code import EXTENSIONS, SKIP_DIRS
from harness.tools.retrieval.hybrid import Stages, rank, rrf
from harness.tools.retrieval.prewarm import start_warming

FILES = {
    "weather/units.py": 'def celsius_to_fahrenheit(value):\n    """Degrees C to degrees F."""\n'
                        "    return value * 9 / 5 + 32\n",
    "mail/outbox.py": 'def send_message(address, body):\n    """Queue an e-mail for delivery."""\n'
                      "    return smtp.queue(address, body)\n",
    "images/resize.py": 'def shrink_picture(image, factor):\n    """Scale an image down."""\n'
                        "    return image.scaled(factor)\n",
    "tables/rows.py": 'def read_rows(handle):\n    """Parse comma separated lines."""\n'
                      "    return [line.split(',') for line in handle]\n",
}


def _shas(files: dict[str, str]) -> dict[str, str]:
    return {p: hashlib.sha256(t.encode()).hexdigest() for p, t in files.items()}


def _index(files: dict[str, str], cache: ChunkCache | None = None) -> CodeIndex:
    index = CodeIndex(cache=cache)
    index.sync(_shas(files), lambda paths: {p: files[p] for p in paths})
    return index


def test_the_model_ships_in_a_package_and_gives_unit_vectors() -> None:
    assert embedding.unavailable() is None
    vectors = embedding.Encoder().encode(["make a photo smaller", "def shrink_picture(image): ..."])
    assert vectors.shape == (2, embedding.DIM)
    assert abs(float((vectors[0] ** 2).sum()) - 1.0) < 1e-4
    assert float(vectors[0] @ vectors[1]) > 0.2


def test_a_query_in_other_words_is_found_by_dense_where_bm25_finds_nothing() -> None:
    index = _index(FILES)
    dense = DenseIndex()
    assert dense.build(index, FILES) == 4
    query = "make a photo smaller"
    assert rank(index, None, query, 3, Stages(dense=False)) == []          # no word in common
    hits = rank(index, dense, query, 3, Stages(bm25=False))
    assert hits[0].chunk.name == "shrink_picture" and hits[0].found_by == ("dense #1",)
    hybrid = rank(index, dense, query, 3, Stages())
    assert hybrid[0].chunk.name == "shrink_picture"
    assert hybrid[0].found_by == ("dense #1",)     # BM25's list is empty: the fusion is dense's order
    # and the words of the code itself still rank first by BM25 inside the hybrid
    named = rank(index, dense, "celsius_to_fahrenheit", 3, Stages())
    assert named[0].chunk.name == "celsius_to_fahrenheit" and named[0].found_by == ("bm25 #1", "dense #1")


def test_rrf_sums_one_over_c_plus_rank() -> None:
    fused = rrf([["a", "b", "c"], ["c", "a"]], c=60)
    assert [item for item, _ in fused] == ["a", "c", "b"]
    scores = dict(fused)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["b"] == pytest.approx(1 / 62)
    # c weighs the ranks: with c = 1 the top of one list beats being fourth in both, with c = 1000 not
    lists = [["x", "q", "r", "y"], ["z", "s", "t", "y"]]
    assert [i for i, _ in rrf(lists, c=1)][:3] == ["x", "z", "y"]
    assert [i for i, _ in rrf(lists, c=1000)][0] == "y"
    # ties keep the order of first appearance
    assert [i for i, _ in rrf([["p"], ["q"]])] == ["p", "q"]


def test_a_second_index_embeds_nothing_and_a_changed_file_only_its_changed_chunks(tmp_path: Path) -> None:
    cache = ChunkCache(tmp_path / "cache.sqlite3")
    files = dict(FILES)
    first = DenseIndex(cache=cache)
    assert first.build(_index(files, cache), files) == 4
    second = DenseIndex(cache=cache)
    index = _index(files, cache)
    assert second.build(index, files) == 0 and not second.missing(index)
    files["tables/rows.py"] += "\n\ndef count_rows(handle):\n    return len(read_rows(handle))\n"
    third = DenseIndex(cache=cache)
    index = _index(files, cache)
    assert len(third.missing(index)) == 5
    assert third.build(index, files) == 1      # the new function; read_rows's text did not change
    assert rank(index, third, "how many lines a table has", 1, Stages(bm25=False))[0].chunk.name == "count_rows"


def test_large_batches_are_embedded_by_worker_processes_as_in_the_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    items = [(f"k{n}", f"def function_{n}(x):\n    return x + {n}\n") for n in range(12)]
    here: dict[str, bytes] = {}
    embedding.embed_many(items, here.update, workers=1)
    monkeypatch.setattr(embedding, "PROCESS_MIN_TEXTS", 1)
    monkeypatch.setattr(embedding, "TASK_TEXTS", 5)
    there: dict[str, bytes] = {}
    assert embedding.embed_many(items, there.update, workers=2) == 12
    np = pytest.importorskip("numpy")
    assert set(here) == set(there)
    for key in here:     # the same model and arithmetic: the same vectors to float16 rounding
        a, b = (np.frombuffer(v[key], dtype="<f2").astype(np.float32) for v in (here, there))
        assert float(a @ b) > 0.999


def test_many_missing_chunks_are_built_in_the_background_and_a_few_inline() -> None:
    files = {f"pkg/m{n}.py": f"def handler_{n}(event):\n    return event.id + {n}\n"
             for n in range(dense_module.INLINE_CHUNKS + 4)}
    index = _index(files)
    dense = DenseIndex()
    note = dense.prepare(index, files, None)
    assert note is not None and note.startswith("the dense half is still being built (") and "of 20 chunks" in note
    assert dense.building is not None
    dense.building.join(120)
    assert dense.prepare(index, files, None) is None
    files["pkg/m0.py"] = "def handler_0(event):\n    return event.id - 1\n"
    index.sync(_shas(files), lambda paths: {p: files[p] for p in paths})
    building = dense.building
    assert dense.prepare(index, index.fetched, None) is None     # one changed chunk: embedded now
    assert dense.building is building


def test_the_stage_switches_are_checked() -> None:
    with pytest.raises(ConfigError, match="both off"):
        ToolsConfig(find_code_bm25=False, find_code_dense=False)
    with pytest.raises(ConfigError, match="find_code_rrf_c must be a whole number of at least 1, got 0"):
        ToolsConfig(find_code_rrf_c=0)
    assert ToolsConfig().find_code_rrf_c == 10 and ToolsConfig().find_code_rerank is False


def test_the_warm_up_builds_the_dense_half_from_the_host_copy(tmp_path: Path) -> None:
    root = tmp_path / "project"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    cache = ChunkCache(tmp_path / "cache.sqlite3")
    index = CodeIndex(cache=cache)
    index.dense = dense = DenseIndex(cache=cache, stop=index.stop_warming)
    thread = start_warming(index, root, EXTENSIONS, SKIP_DIRS)
    assert thread is not None
    thread.join(120)
    assert dense.building is not None
    dense.building.join(1)
    assert dense.building.is_alive() and dense.embedded == 0    # it embeds once the first answer is given
    index.answering.set()
    index.sync(_shas(FILES), lambda paths: {p: FILES[p] for p in paths})    # the first query ...
    dense.building.join(0.5)
    assert dense.building.is_alive()                            # ... still answering
    index.answering.clear()
    dense.building.join(120)
    assert len(index.files) == 4 and not dense.missing(index) and dense.embedded == 4
    assert rank(index, dense, "make a photo smaller", 1, Stages())[0].chunk.name == "shrink_picture"


def test_the_host_copy_is_read_through_no_link(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_text("def secret():\n    return 1\n")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    assert dense_module._read(str(real)) == "def secret():\n    return 1\n"     # the control: a plain file reads
    assert dense_module._read(str(link)) is None


STOPPED_SESSION = """
import sys
from pathlib import Path
from harness.tools.retrieval import embedding
from harness.tools.retrieval.chunk_cache import ChunkCache
from harness.tools.retrieval.code_index import CodeIndex
from harness.tools.retrieval.dense import DenseIndex
from harness.tools.retrieval.find_code import EXTENSIONS, SKIP_DIRS
from harness.tools.retrieval.prewarm import start_warming

root, cache_file = Path(sys.argv[1]), Path(sys.argv[2])
cache = ChunkCache(cache_file)
index = CodeIndex(cache=cache)
index.dense = dense = DenseIndex(cache=cache, stop=index.stop_warming)
start_warming(index, root, EXTENSIONS, SKIP_DIRS).join(120)
assert dense.is_building()                   # waiting for the first answer, which never comes
assert index.stop() is True                  # the session ends: both threads have ended
assert not dense.is_building() and not index.warming.is_alive()
assert embedding._SHARED is None or embedding._SHARED._session is None, "the stopped builder loaded the model"
print("stopped")
"""


def test_a_session_that_ends_with_the_dense_builder_waiting_exits_cleanly(tmp_path: Path) -> None:
    """The builder used to load the model after the session's end, while the interpreter exited:
    onnxruntime's threads were torn down under it and the process aborted (`harness run` exited -6,
    "terminate called without an active exception"). `CodeIndex.stop` now waits for it, and a
    stopped builder loads nothing."""
    root = tmp_path / "project"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for attempt in range(3):
        done = subprocess.run([sys.executable, "-c", STOPPED_SESSION, str(root), str(tmp_path / f"c{attempt}.sqlite3")],
                              capture_output=True, text=True, timeout=180)
        assert (done.returncode, done.stdout) == (0, "stopped\n"), done.stderr
        assert "terminate called" not in done.stderr

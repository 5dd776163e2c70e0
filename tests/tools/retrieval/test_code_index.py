"""The BM25 index over code chunks: chunking, ranking, incremental updates by fingerprint."""

from __future__ import annotations

from collections.abc import Callable

from harness.tools.retrieval.chunks import chunk_file, terms
from harness.tools.retrieval.code_index import CodeIndex, rank_files

CORE = '''"""Word counting."""
import re

_WORD = re.compile(r"[a-z]+")


def count_words(text):
    """Count each word."""
    return len(_WORD.findall(text))


class Report:
    """A printable report of word frequencies."""

    title = "report"

    def render(self, counts):
        return "\\n".join(counts)
'''

OTHER = "def parse_duration(text):\n    return int(text.rstrip('h')) * 3600\n"


def _fetcher(texts: dict[str, str], log: list[list[str]]) -> Callable[[list[str]], dict[str, str]]:
    def fetch(paths: list[str]) -> dict[str, str]:
        log.append(paths)
        return {p: texts[p] for p in paths if p in texts}
    return fetch


def test_python_files_are_chunked_by_function_class_and_module_rest() -> None:
    chunks = chunk_file("wc/core.py", CORE)
    labels = [(c.label, c.start, c.end) for c in chunks]
    assert ("function count_words", 7, 9) in labels
    assert ("function Report.render", 17, 18) in labels
    assert ("class Report", 12, 18) in labels
    assert any(label == "module" and start == 1 for label, start, _ in labels)
    class_chunk = next(c for c in chunks if c.label == "class Report")
    assert "def render" not in class_chunk.text and "printable report" in class_chunk.text


def test_unparsable_python_falls_back_to_line_windows() -> None:
    chunks = chunk_file("broken.py", "def f(:\n" + "x = 1\n" * 100)
    assert [c.kind for c in chunks] == ["lines", "lines", "lines"]
    assert (chunks[0].start, chunks[0].end) == (1, 40)


def test_terms_split_identifiers_and_stem() -> None:
    assert terms("countWords top_words counting") == [
        "countwords", "count", "word", "top_words", "top", "word", "count"]


def test_query_in_words_finds_the_function() -> None:
    index = CodeIndex()
    index.add_file("wc/core.py", "a", CORE)
    index.add_file("dur/parse.py", "b", OTHER)
    hits = index.search("counting the words of a text", 3)
    assert hits[0][0].name == "count_words"
    assert rank_files(hits)[0] == "wc/core.py"


def test_sync_drops_deleted_files_and_reindexes_changed_ones() -> None:
    index = CodeIndex()
    log: list[list[str]] = []
    report = index.sync({"wc/core.py": "a", "dur/parse.py": "b"},
                        _fetcher({"wc/core.py": CORE, "dur/parse.py": OTHER}, log))
    assert (report.added, report.changed, report.removed) == (2, 0, 0)
    renamed = OTHER.replace("parse_duration", "read_interval")
    report = index.sync({"dur/parse.py": "c"}, _fetcher({"dur/parse.py": renamed}, log))
    assert (report.added, report.changed, report.removed) == (0, 1, 1)
    assert log[-1] == ["dur/parse.py"]
    names = [c.name for c, _ in index.search("count words parse duration read interval", 10)]
    assert names == ["read_interval"]
    assert index.posting("count_words") == {} and index.posting("parse_duration") == {}
    assert "parse_duration" not in index.vocabulary() and "read_interval" in index.vocabulary()


def test_unchanged_files_are_not_fetched_again() -> None:
    index = CodeIndex()
    log: list[list[str]] = []
    index.sync({"a.py": "1"}, _fetcher({"a.py": OTHER}, log))
    index.sync({"a.py": "1"}, _fetcher({"a.py": OTHER}, log))
    assert log == [["a.py"]]


def test_the_k_best_are_those_of_a_full_ranking_ties_broken_by_place() -> None:
    index = CodeIndex()
    for n in range(40):       # many chunks with equal scores, and some that score higher
        index.add_file(f"pkg/m{n % 7}_{n}.py", f"{n:064x}",
                       "def count_words(text):\n    return 1\n" if n % 3 else
                       "def count_words(text):\n    return count_words(words(text))\n")
    everything = index.search("count words", 1000)
    ranked = sorted(everything, key=lambda hit: (-hit[1], hit[0].path, hit[0].start))
    assert everything == ranked and len({score for _, score in everything}) == 2
    for k in (1, 3, 13, 14, 40):
        assert index.search("count words", k) == ranked[:k]


def test_a_result_shows_the_first_line_of_its_chunk() -> None:
    index = CodeIndex()
    index.add_file("wc/core.py", "0" * 64, CORE)
    chunk, _ = index.search("printable report", 1)[0]
    assert (chunk.label, chunk.text) == ("class Report", "class Report:")

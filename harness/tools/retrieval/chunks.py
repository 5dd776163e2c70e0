"""Cutting source files into retrievable chunks, and cutting text into index terms.

Python files are cut along their outline (`outline.py`: read from the lines, or by the parser where
the lines cannot tell): each function and method is a chunk, each class a chunk of its own lines
without its methods (header, docstring, attributes), and the module's remaining lines (imports,
constants) chunks of at most `WINDOW` lines. Other text files, and Python files neither can read, are
cut into windows of `WINDOW` lines.

Terms: identifiers are split at `_` and camelCase humps and kept whole too (so `top_words` matches
"top words" and `top_words`), lower-cased, lightly stemmed ("counting" -> "count"), stop words out.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from itertools import chain

from harness.tools.retrieval import outline

WINDOW = 40

STOP = frozenset("""a an and are as at be but by can could did do does for from had has have he i if in
into is it its may me my no not of on or our should so such than that the their them then there these
they this those to was we were what when where which while who will with would you your self cls def
""".split())

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[^\W\d_]+")
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[^\W\d_A-Za-z]+")
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ed", "es", "ly", "s")


def stem(word: str) -> str:
    """A light suffix stripper: counting, counts, counted -> count; parse, parsing -> pars."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    return word[:-1] if word.endswith("e") and len(word) >= 4 else word


@functools.lru_cache(maxsize=1 << 16)
def ident_terms(ident: str) -> tuple[str, ...]:
    """The terms of one identifier."""
    parts = [p.lower() for p in _PART.findall(ident)]
    whole = ident.lower().strip("_")
    head = (whole,) if len(parts) > 1 and whole not in STOP else ()
    return head + tuple(stem(p) for p in parts if len(p) > 1 and p not in STOP)


# The runs of word characters (ASCII letters, digits, `_`, and all beyond ASCII) are cut out in C: the
# UTF-8 bytes with every other byte made a space, then split. `_IDENT` finds in each run what it would
# find in the whole text, since none of its matches holds another character; a regex over the text
# had cost twice as much (0.72 against 0.2 s over a django tree).
_RUN_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") | frozenset(range(128, 256))
_SPACED = bytes(b if b in _RUN_BYTES else 0x20 for b in range(256))


def _runs(text: str) -> list[bytes]:
    return text.encode("utf-8", "surrogatepass").translate(_SPACED).split()


@functools.lru_cache(maxsize=1 << 18)
def _run_terms(run: bytes) -> tuple[str, ...]:
    """The terms of one run of word characters, in order (cached: a project repeats the same few
    thousand names millions of times)."""
    return tuple(term for ident in _IDENT.findall(run.decode("utf-8", "surrogatepass")) for term in ident_terms(ident))


def terms(text: str) -> list[str]:
    """The index terms of `text`, in order, with repeats."""
    return [term for run in _runs(text) for term in _run_terms(run)]


def term_counts(text: str) -> dict[str, int]:
    """How often each term occurs in `text` (what the index stores; `terms` without the order), all
    counted in C: the runs' cached terms chained into a `Counter` (a django tree's 42,031 chunks in
    0.9 s; counting each distinct identifier first, then adding its terms in Python, took 1.85 s)."""
    return dict(Counter(chain.from_iterable(map(_run_terms, _runs(text)))))


@dataclass(frozen=True)
class Chunk:
    path: str
    start: int          # first line, 1-based
    end: int            # last line, inclusive
    kind: str           # function | class | module | lines
    name: str           # qualified name for code, "" for windows
    text: str           # the text that is indexed (may skip nested methods)

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}".strip() if self.name else self.kind


PYTHON = (".py", ".pyi")


def chunk_file(path: str, text: str) -> list[Chunk]:
    found = outline.read(text, path) if path.endswith(PYTHON) else None
    if found is not None:
        return _python_chunks(path, text, found)
    return _windows(path, text.split("\n"), list(range(1, text.count("\n") + 2)), "lines")


def _python_chunks(path: str, text: str, blocks: outline.Outline) -> list[Chunk]:
    lines = text.split("\n")
    chunks: list[Chunk] = []
    covered: set[int] = set()

    def visit(body: outline.Outline, prefix: str) -> None:
        for block in body:
            start, end, name = block.start, block.end, prefix + block.name
            if block.kind == "class":
                visit(block.body, name + ".")
                own = [n for n in range(start, end + 1) if n not in covered]
                chunks.append(Chunk(path, start, end, "class", name, "\n".join(lines[n - 1] for n in own)))
            else:
                chunks.append(Chunk(path, start, end, "function", name, "\n".join(lines[start - 1:end])))
            covered.update(range(start, end + 1))

    visit(blocks, "")
    rest = [n for n in range(1, len(lines) + 1) if n not in covered and lines[n - 1].strip()]
    return chunks + _windows(path, lines, rest, "module")


def _windows(path: str, lines: list[str], numbers: list[int], kind: str) -> list[Chunk]:
    """Chunks of at most WINDOW of the given line numbers (runs of consecutive numbers kept together)."""
    out: list[Chunk] = []
    group: list[int] = []
    for n in numbers + [-1]:
        if group and (n == -1 or len(group) >= WINDOW or (kind == "module" and n - group[-1] > 3)):
            body = "\n".join(lines[i - 1] for i in group)
            if body.strip():
                out.append(Chunk(path, group[0], group[-1], kind, "", body))
            group = []
        if n != -1:
            group.append(n)
    return out


# What the dense half (`embedding.py`) reads of a chunk, and the key its vector is stored under.
MODEL = "all-MiniLM-L6-v2-int8"
MAX_TOKENS = 64           # a chunk's first 64 word pieces: its kind, name, signature and first lines
                          # (the cost is about linear in them: 128 took twice as long, 28 chunks/s on 2 cores)


def embed_text(kind: str, name: str, text: str) -> str:
    """What the model reads of a chunk: its kind and name, then its text."""
    return f"{kind} {name}\n{text}" if name else text


def vector_key(text: str) -> str:
    """A vector's key: the model, how much of the text it reads, and the text's hash (the same text
    has the same vector wherever and in whichever commit it occurs)."""
    return hashlib.blake2b(f"{MODEL}\0{MAX_TOKENS}\0{text}".encode("utf-8", "surrogatepass"),
                           digest_size=16).hexdigest()


CODE = (".py", ".pyi", ".js", ".ts", ".jsx", ".tsx", ".c", ".h", ".cc", ".cpp", ".hpp", ".go", ".rs", ".java",
        ".rb", ".sh", ".sql")
TEST_DIRS = frozenset(("test", "tests", "testing", "__tests__"))


def dense_scope(path: str) -> bool:
    """Whether the dense half embeds the chunks of `path`: source code outside test folders and test
    files. Embedding costs a hundred times what analysing does (a django tree: 42,000 chunks, of which
    15,000 are this), and tests and text restate an issue's own words, which BM25 finds; they stay BM25's."""
    if not path.endswith(CODE):
        return False
    parts = path.split("/")
    name = parts[-1]
    if any(part in TEST_DIRS for part in parts[:-1]) or name == "conftest.py":
        return False
    return not (name.startswith("test_") or name.rsplit(".", 1)[0].endswith("_test"))

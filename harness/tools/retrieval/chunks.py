"""Cutting source files into retrievable chunks, and cutting text into index terms.

Python files are cut along the syntax tree: each function and method is a chunk, each class a
chunk of its own lines without its methods (header, docstring, attributes), and the module's
remaining lines (imports, constants) chunks of at most `WINDOW` lines. Other text files, and
Python files that do not parse, are cut into windows of `WINDOW` lines.

Terms: identifiers are split at `_` and camelCase humps and kept whole too (so `top_words` matches
"top words" and `top_words`), lower-cased, lightly stemmed ("counting" -> "count"), stop words out.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import Counter
from dataclasses import dataclass

from harness.tools.editing.lint import parse_python

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


@functools.lru_cache(maxsize=1 << 18)
def ident_terms(ident: str) -> tuple[str, ...]:
    """The terms of one identifier (cached: a project repeats the same few thousand names millions of times)."""
    parts = [p.lower() for p in _PART.findall(ident)]
    whole = ident.lower().strip("_")
    head = (whole,) if len(parts) > 1 and whole not in STOP else ()
    return head + tuple(stem(p) for p in parts if len(p) > 1 and p not in STOP)


def terms(text: str) -> list[str]:
    """The index terms of `text`, in order, with repeats."""
    out: list[str] = []
    for ident in _IDENT.findall(text):
        out.extend(ident_terms(ident))
    return out


def term_counts(text: str) -> dict[str, int]:
    """How often each term occurs in `text` (what the index stores; `terms` without the order).

    The identifiers are counted first (in C), then each distinct one's cached terms added with its
    count: a chunk repeats its few names many times, so the loop in Python runs once per distinct
    name instead of once per occurrence (3.1 to 2.1 s of CPU over a django tree, whose analysis
    this stage had been half of)."""
    counts: dict[str, int] = {}
    get = counts.get
    for ident, n in Counter(_IDENT.findall(text)).items():
        for term in ident_terms(ident):
            counts[term] = get(term, 0) + n
    return counts


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
    if path.endswith(PYTHON):
        try:
            return _python_chunks(path, text, parse_python(text, path))
        except (SyntaxError, ValueError, RecursionError):
            pass
    return _windows(path, text.split("\n"), list(range(1, text.count("\n") + 2)), "lines")


def _python_chunks(path: str, text: str, tree: ast.Module) -> list[Chunk]:
    lines = text.split("\n")
    chunks: list[Chunk] = []
    covered: set[int] = set()

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            end = node.end_lineno or node.lineno
            name = prefix + node.name
            if isinstance(node, ast.ClassDef):
                visit(node.body, name + ".")
                own = [n for n in range(start, end + 1) if n not in covered]
                chunks.append(Chunk(path, start, end, "class", name, "\n".join(lines[n - 1] for n in own)))
            else:
                chunks.append(Chunk(path, start, end, "function", name, "\n".join(lines[start - 1:end])))
            covered.update(range(start, end + 1))

    visit(tree.body, "")
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

"""The outline `find_code` cuts Python by: read from the lines, it must be the parser's, file for file."""

from __future__ import annotations

import ast
import tarfile
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.tools.editing.lint import gc_paused
from harness.tools.retrieval import chunks, outline
from harness.tools.retrieval.chunks import chunk_file, term_counts, terms
from tests.evaluation.conftest import SWEBENCH_DATA

# Every stored repository but the second commits of django and sympy (the same code, twice the time).
REPOSITORIES = ["django__django-16139", "sympy__sympy-20590", "sphinx-doc__sphinx-8713", "pylint-dev__pylint-7080",
                "pytest-dev__pytest-5227", "pydata__xarray-5131", "mwaskom__seaborn-3190"]


def _python_files(name: str) -> Iterator[tuple[str, str]]:
    tarball = SWEBENCH_DATA / "repos" / f"{name}.tar.gz"
    assert tarball.is_file(), f"the SWE-bench source tarball {tarball} is missing (set HARNESS_SWEBENCH_DATA)"
    with tarfile.open(tarball) as archive:
        for member in archive:
            if member.isfile() and member.name.endswith((".py", ".pyi")):
                stream = archive.extractfile(member)
                assert stream is not None
                yield member.name, stream.read().decode("utf-8", "replace")


def _parsed(text: str) -> outline.Outline | None:
    with warnings.catch_warnings(), gc_paused():    # the collector's passes over large trees double the time
        warnings.simplefilter("ignore")            # invalid escapes in old code
        try:
            return outline.from_tree(ast.parse(text))
        except (SyntaxError, ValueError, RecursionError):
            return None


@pytest.mark.parametrize("name", REPOSITORIES)
def test_the_outline_read_from_the_lines_is_the_parsers_in_every_file_of_a_real_repository(name: str) -> None:
    read = declined = 0
    wrong: list[str] = []
    for path, text in _python_files(name):
        parsed = _parsed(text)
        if parsed is None:
            continue
        scanned = outline.scan(text)
        if scanned is None:
            declined += 1
        elif scanned != parsed:
            wrong.append(path)
        else:
            read += 1
    assert not wrong, f"{len(wrong)} files read otherwise than the parser does, e.g. {wrong[:5]}"
    assert read > 100 and declined <= 0.05 * (read + declined), (read, declined)   # the quick way is the usual one


CASES = {
    "a docstring quoting code at the margin": (
        'def f():\n    """Usage:\n\ndef g():\n    pass\n"""\n    return 1\n\n\nx = 2\n'),
    "a signature over lines, its close at the margin": (
        "def f(\n    a: int,\n    b: int = (1 +\n2),\n) -> int:\n    return a\n\n\ny = 1\n"),
    "decorators over lines": (
        "@decorate(\n    x=1,\n)\n@other\nclass C:\n    @property\n    def p(self):\n        return 1\n"),
    "a matrix product continuing a line": "x = (a\n@ b)\ndef f():\n    return (a\n@ b)\n",
    "a backslash continuation": "def f():\n    return 1 + \\\n2\nz = 3\n",
    "one-line bodies": "def f(): return 1\nclass C: pass\nasync def g(): await x\n",
    "a comment at the margin inside a body": (
        "def f():\n    x = 1\n# a note\n    return x\n# after\n\nv = 1\n"),
    "quotes and hashes in strings and comments": (
        "s = 'it''s # not a comment'\nt = \"a ( [ {\"  # a ' quote \" and ) bracket\n"
        "def f(x=')', y=\"#\"):\n    return f'{x!r:>{y}}' + rb'\\'' + b'(' \n"),
    "triple quotes holding the other kind and escapes": (
        "def f():\n    '''holds \"\"\" and \\''' and\ndef fake():\n'''\n"
        "    return \"\"\"\\\"\"\"\"\"\"\n\nclass D:\n    x = 1\n"),
    "definitions inside an if are not the module's": (
        "if X:\n    def f():\n        pass\nelse:\n    class C:\n        pass\n"),
    "nested classes and methods": (
        "class A:\n    '''doc'''\n    class B:\n        def m(self):\n            def inner():\n                pass\n"
        "    def n(self): pass\n\n    x = [\n1]\n\n\ndef after(): pass\n"),
    "async, and a keyword-like name": (
        "async def run():\n    async with x:\n        pass\nclass_ = 1\ndefault = 2\n"),
    "a string continued by a backslash": "x = 'one \\\ntwo'\ndef f():\n    pass\n",
    "a body ending in a multi-line string": "def f():\n    return '''a\nb'''\n\n\n# end\n",
}


@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_tricky_layouts_are_read_as_the_parser_reads_them(text: str) -> None:
    parsed = _parsed(text)
    assert parsed is not None, "the case itself must be valid Python"
    assert outline.scan(text) == parsed


DECLINED = {
    "tabs": "class C:\n\tdef f(self):\n\t\tpass\n",
    "carriage returns": "def f():\r\n    pass\r\n",
    "a string left open": "def f():\n    return 'abc\n",
    "a triple-quoted string left open": "def f():\n    '''abc\n",
    "brackets that do not balance": "def f(:\n    pass\n",
    "a closing bracket too many": "x = 1)\ndef f():\n    pass\n",
    "a name outside ASCII (the parser normalises it)": "def \ufb01le():\n    pass\n",
    "a byte-order mark": "\ufeffdef f():\n    pass\n",
    "brackets nested deeper than Python allows": "x = " + "(" * 300 + ")" * 300 + "\n",
    "classes nested deeper than Python allows": (
        "".join(" " * i + f"class C{i}:\n" for i in range(102)) + " " * 102 + "x = 1\n"),
}


@pytest.mark.parametrize("text", DECLINED.values(), ids=DECLINED.keys())
def test_what_the_lines_cannot_tell_is_left_to_the_parser(text: str) -> None:
    assert outline.scan(text) is None
    parsed = _parsed(text)
    via_parser = chunks._python_chunks("m.py", text, parsed) if parsed is not None else None
    got = chunk_file("m.py", text)
    if via_parser is not None:
        assert got == via_parser
    else:
        assert {c.kind for c in got} == {"lines"}


def test_a_syntax_error_inside_a_function_keeps_the_files_functions_as_chunks() -> None:
    text = "def ok():\n    return 1\n\n\ndef half_edited(x):\n    if x ==\n        return 2\n"
    assert _parsed(text) is None
    assert [(c.label, c.start, c.end) for c in chunk_file("m.py", text)] == [
        ("function ok", 1, 2), ("function half_edited", 5, 7)]


def _terms_as_before(text: str) -> Counter[str]:
    """The counting `term_counts` replaced: the identifiers found by one regex over the whole text."""
    return Counter(term for ident in chunks._IDENT.findall(text) for term in chunks.ident_terms(ident))


@pytest.mark.parametrize("text", [
    "caféBar x1é 1abc naïve_name Ωmega_value émigré2x __dunder__ ABCDef HTTPServer 42 0x1F é_b",
    "Ünïcödé—dash«quoted»word ½half ß١٢٣digits  日本語テキスト_ident mixedÜber_Case",
    "lone surrogate \udcff inside, and tabs\tand\x0bvertical\x0cfeeds and a NUL \0 byte",
])
def test_terms_are_those_of_one_regex_over_the_whole_text(text: str) -> None:
    assert term_counts(text) == _terms_as_before(text)
    assert Counter(terms(text)) == _terms_as_before(text)


def test_terms_of_every_file_of_a_real_repository_are_those_of_one_regex_over_the_text() -> None:
    tarball = SWEBENCH_DATA / "repos" / "django__django-16139.tar.gz"
    assert tarball.is_file(), f"the SWE-bench source tarball {tarball} is missing (set HARNESS_SWEBENCH_DATA)"
    checked = 0
    with tarfile.open(tarball) as archive:
        for member in archive:
            if member.isfile() and Path(member.name).suffix in (".py", ".txt", ".js", ".html"):
                stream = archive.extractfile(member)
                assert stream is not None
                text = stream.read().decode("utf-8", "replace")
                assert term_counts(text) == _terms_as_before(text), member.name
                checked += 1
    assert checked > 3000

"""The lint gate's quick way for an edit inside one function must say what a whole pyflakes pass says:
on thousands of edits of real SWE-bench files, and on the cases its reasoning turns on."""

from __future__ import annotations

import random
import re
import tarfile
import textwrap
import warnings
from collections import Counter
from collections.abc import Iterator

import pytest

from harness.tools.editing import lint, lint_delta
from harness.tools.editing.lint import LintVerdict, Problem
from harness.tools.retrieval import outline
from tests.evaluation.conftest import SWEBENCH_DATA


def _whole(text: str, filename: str = "m.py") -> tuple[Problem, ...]:
    return lint.problems_of(text, filename)


def _derived(before: str, after: str, filename: str = "m.py") -> tuple[Problem, ...] | None:
    return lint_delta.derive(before, _whole(before, filename), after, filename)


def _same(found: tuple[Problem, ...], expected: tuple[Problem, ...]) -> bool:
    def key(problems: tuple[Problem, ...]) -> Counter[tuple[str, int, bool]]:
        return Counter((p.same_as, p.line, p.blocking) for p in problems)
    return key(found) == key(expected)


def _said(v: LintVerdict) -> tuple[list[str], list[str]]:
    return [str(p) for p in v.new_errors], [str(p) for p in v.new_warnings]


MODULE = textwrap.dedent('''\
    import os
    import re
    import json
    from typing import Any


    def helper(path: str) -> str:
        return os.path.basename(path)


    class Store:
        limit = 3

        def load(self, text: str) -> Any:
            data = json.loads(text)
            return data

        def size(self) -> int:
            return self.limit


    def tail(words):
        return [w for w in words if re.match("x", w)]
    ''')


def test_an_undefined_name_in_a_method_is_found_the_quick_way_and_blocks() -> None:
    after = MODULE.replace("        return data\n", "        return dta\n")
    derived = _derived(MODULE, after)
    assert derived is not None and _same(derived, _whole(after))       # the quick way was taken, and agrees
    verdict = lint_delta.compare(MODULE, after, "m.py")
    assert _said(verdict) == (["line 16: undefined name 'dta'"],
                              ["line 15: local variable 'data' is assigned to but never used"])
    assert _said(verdict) == _said(lint.compare(MODULE, after, "m.py"))


def test_an_import_only_the_edited_function_used_becomes_unused() -> None:
    after = MODULE.replace('re.match("x", w)', 'w.startswith("x")')
    derived = _derived(MODULE, after)             # no other function so much as names `re`
    assert derived is not None and _same(derived, _whole(after))
    assert _said(lint_delta.compare(MODULE, after, "m.py")) == ([], ["line 2: 're' imported but unused"])


def test_an_import_another_function_names_is_left_to_a_whole_pass_when_the_edited_one_drops_it() -> None:
    before = MODULE.replace("        return self.limit\n", "        return len(os.sep) + self.limit\n")
    after = before.replace("os.path.basename(path)", "path")
    assert _derived(before, after) is None        # Store.size names `os`: whether it uses it, the whole file tells
    assert _said(lint_delta.compare(before, after, "m.py")) == ([], [])
    star = MODULE.replace("import re\n", "from re import *\n").replace('re.match("x", w)', 'match("x", w)')
    assert _derived(star, star.replace('match("x", w)', "w")) is None   # any undefined name uses a star import


def test_an_unused_import_put_to_use_and_dropped_again_is_told_each_time() -> None:
    before = MODULE.replace("import json\n", "import json\nimport sys\n")
    assert any(p.message == "'sys' imported but unused" for p in _whole(before))
    used = before.replace("        return data\n", "        return data or sys.argv\n")
    derived = _derived(before, used)
    assert derived is not None and _same(derived, _whole(used))
    assert lint_delta.compare(before, used, "m.py").old_count == 1
    dropped = used.replace(" or sys.argv", "")
    again = lint_delta.derive(used, derived, dropped, "m.py")   # from the problems the quick way worked out
    assert again is not None and _same(again, _whole(dropped))
    assert any(p.message == "'sys' imported but unused" for p in again)


@pytest.mark.parametrize("change", [
    ("    return os.path.basename(path)\n", "    global CACHE\n    return os.path.basename(path)\n"),  # global
    ("def tail(words):", "def tail(words=(n := 3)):"),           # a `:=` in a header binds at module level
    ("class Store:\n    limit = 3\n", "class Store:\n    limit = missing\n"),   # not in a function
    ("def helper(path", "def help(path"),                       # the name the module binds changes
    ("        return data\n", "        return (data\n"),            # a syntax error
    ("        return data\n", "        return data\n\nx = 1\n"),   # the function ends elsewhere now
])
def test_what_the_quick_way_cannot_tell_is_left_to_a_whole_pass(change: tuple[str, str]) -> None:
    after = MODULE.replace(*change, 1)
    assert after != MODULE
    assert _derived(MODULE, after) is None
    assert _said(lint_delta.compare(MODULE, after, "m.py")) == _said(lint.compare(MODULE, after, "m.py"))


def test_decorators_of_the_other_functions_still_count() -> None:
    before = textwrap.dedent('''\
        from typing import overload


        @overload
        def mult(x: int) -> int:
            ...


        @overload
        def mult(x: str) -> str:
            ...


        def mult(x):
            return x


        class Box:
            @property
            def size(self):
                return 1

            @size.setter
            def size(self, value):
                self.value = value
        ''')
    for old, new in (("    return x\n", "    y = x\n    return x\n"),       # no "redefinition of unused 'mult'"
                     ("        self.value = value\n", "        self.value = valu\n")):
        after = before.replace(old, new)
        derived = _derived(before, after)
        assert derived is not None and _same(derived, _whole(after)), old
    assert not _whole(before)


def test_the_file_name_still_counts() -> None:
    before = "import os\n\n\ndef f():\n    return os.sep\n"
    after = "import os\n\n\ndef f():\n    return __path__, os.sep\n"
    for name in ("__init__.py", "mod.py"):     # pyflakes knows `__path__` in a package's __init__ only
        derived = _derived(before, after, name)
        assert derived is not None and _same(derived, _whole(after, name))
    assert _said(lint_delta.compare(before, after, "mod.py"))[0] == ["line 5: undefined name '__path__'"]


# ---- real files, edited at random inside their functions ------------------------------------------

_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
# (repository, the share of its files edited): about 500 files in all
REPOSITORIES = [("django__django-16139", 0.1), ("sympy__sympy-20590", 0.1), ("sphinx-doc__sphinx-8713", 0.5),
                ("pytest-dev__pytest-5227", 1.0)]


def _python_files(name: str) -> Iterator[tuple[str, str]]:
    tarball = SWEBENCH_DATA / "repos" / f"{name}.tar.gz"
    assert tarball.is_file(), f"the SWE-bench source tarball {tarball} is missing (set HARNESS_SWEBENCH_DATA)"
    with tarfile.open(tarball) as archive:
        for member in archive:
            if member.isfile() and member.name.endswith(".py"):
                stream = archive.extractfile(member)
                assert stream is not None
                text = stream.read().decode("utf-8", "replace")
                if 30 < text.count("\n") < 5000:
                    yield member.name.rsplit("/", 1)[-1], text


def _edit(rng: random.Random, text: str) -> str | None:
    """One edit inside a function's body, of the kinds a model makes and the kinds the reasoning turns on:
    a line added that uses an import, an undefined name or a new local; a line removed; a name swapped;
    every use of an import in the body removed; an import inside the body; a comment."""
    found = outline.scan(text)
    functions = [f for f in lint_delta._functions(found or ()) if f.end > f.header_end]
    if not functions:
        return None
    f = rng.choice(functions)
    lines = text.split("\n")
    body = range(f.header_end, f.end)
    row = rng.choice(body)
    first = lines[f.header_end]
    indent = first[:len(first) - len(first.lstrip(" "))]
    imports = re.findall(r"^(?:import|from \S+ import) (\w+)", text, re.M)
    names = [*imports, "undefined_thing", "os", "self", "len"]
    kind = rng.randrange(8)
    if kind == 0:
        lines.insert(row, f"{indent}_probe = {rng.choice(names)}")
    elif kind == 1:
        del lines[row]
    elif kind == 2:
        spots = list(_IDENTIFIER.finditer(lines[row]))
        if not spots:
            return None
        spot = rng.choice(spots)
        lines[row] = lines[row][:spot.start()] + rng.choice(names) + lines[row][spot.end():]
    elif kind == 3:
        used = [n for n in imports if any(re.search(rf"\b{n}\b", lines[i]) for i in body)]
        if not used:
            return None
        name = rng.choice(used)
        for i in body:
            lines[i] = re.sub(rf"\b{name}\b", "len", lines[i])
    elif kind == 4:
        lines.insert(row, f"{indent}import os")
    elif kind == 5:
        lines.insert(row, f"{indent}{rng.choice(names)} = 1")
    elif kind == 6:
        lines.insert(row, f"{indent}return {rng.choice(names)}")
    else:
        lines[row] += "  # touched"
    return "\n".join(lines)


@pytest.mark.parametrize(("name", "share"), REPOSITORIES)
def test_the_quick_way_says_what_a_whole_pass_says_on_edits_of_a_real_repository(name: str, share: float) -> None:
    rng = random.Random(name)
    taken = whole = 0
    wrong: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # invalid escapes in old code
        for filename, text in _python_files(name):
            if rng.random() > share:
                continue
            before, known = text, _whole(text, filename)
            for _ in range(2):                    # the second edit starts from the problems worked out
                after = _edit(rng, before)
                if after is None:
                    break
                derived = lint_delta.derive(before, known, after, filename)
                expected = _whole(after, filename)
                if derived is None:
                    whole += 1
                    before, known = after, expected
                    continue
                taken += 1
                if not _same(derived, expected) or _said(lint.verdict(known, derived)) != _said(
                        lint.verdict(known, expected)):
                    wrong.append(filename)
                    break
                before, known = after, derived
    assert not wrong, f"{len(wrong)} edits answered otherwise than a whole pass, e.g. in {wrong[:5]}"
    assert taken > 80 and taken > whole, (taken, whole)      # the quick way is the usual one

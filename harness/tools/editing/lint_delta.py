"""The lint gate for an edit inside one function: pyflakes over the module with every other function
cut to one line, instead of over the whole file. The answer is the whole file's, exactly; where it
could differ, the whole file is checked.

Why it is exact. pyflakes walks the module's own statements first and every function body after
them, so what it says of a function body depends on the module's bindings (made by its own
statements and by the `def` lines themselves, never by a body, unless the body says `global`) and on
the body itself; what it says of the module's own statements does not depend on any body. The one
message that depends on the bodies is "'x' imported but unused" at module level (and a redefinition
of such an import, reported with it): a body that uses `x` marks the import used. So, for an edit that
changes the lines of one function F and nothing else:
- the problems outside F are the old file's, lines past F moved by the lines the edit added;
- F's problems are those pyflakes finds in F within the module with every other function cut down to
  an assignment to its name (or, decorated, to its decorators over an empty `def`): F sees the same
  module names;
- an import is unused after the edit as the two cut-down modules, before and after, and the whole
  file before tell: unused before in the whole file (nothing else uses it), the cut module after
  decides; used before while the cut module before did not use it, a cut body uses it, still used.
  Used before by F alone, as far as the cut module before shows, and not by F now: unused if no other
  function holds a word of the import at all; else only the whole file can tell, and it is checked.
Anything else falls back to the whole file: `global` anywhere, a `:=` in a function's header (it
binds at module level), an edit outside one function's lines or that moves where a function begins or ends, a text
the outline scan (`harness.tools.retrieval.outline.scan`) declines, a syntax error before or after,
a "redefinition of unused" import (its report depends on the import's being used).
`tests/tools/editing/test_lint_delta.py` compares the answer with the whole file's on hundreds of edits
of real SWE-bench files (5,100 more were checked the same way once).

On a 10,000-line module a gated edit took one pyflakes pass over the file (about 150-190 ms here);
this way it takes the outline scan and two passes over the cut modules (`bench/bench_edit.py`).
"""

from __future__ import annotations

import functools
import re
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from harness.tools.editing import lint
from harness.tools.editing.lint import LintVerdict, Problem
from harness.tools.retrieval import outline
from harness.tools.retrieval.outline import Block

_GLOBAL = re.compile(r"(?:^|;)[ \t]*global[ \t]", re.M)   # a `global` statement, or a string's line like one
_WORD = re.compile(r"\w+")
_ORIGIN = re.compile(r" from line (\d+)$")
_IMPORT = re.compile(r"[ \t]*(?:from[ \t].*)?import\b")
_UNUSED_IMPORT = " imported but unused"
_REDEFINED = "redefinition of unused "
_KNOWN_MAX = 8

# Problems of texts this module worked out without a whole pass (each is the text before the next edit)
_known: OrderedDict[tuple[str, str], tuple[Problem, ...]] = OrderedDict()
_known_lock = threading.Lock()


def compare(before: str, after: str, filename: str = "<file>") -> LintVerdict:
    """`lint.compare`, working out `after`'s problems from `before`'s where the edit allows (see above)."""
    old = problems(before, filename)
    new = derive(before, old, after, filename)
    if new is None:
        new = lint.check(after, filename)
    else:
        with _known_lock:
            _known[(after, filename)] = new
            _known.move_to_end((after, filename))
            while len(_known) > _KNOWN_MAX:
                _known.popitem(last=False)
    return lint.verdict(old, new)


def problems(text: str, filename: str = "<file>") -> tuple[Problem, ...]:
    """`text`'s problems: worked out by an earlier `compare`, or checked now."""
    with _known_lock:
        found = _known.get((text, filename))
    return found if found is not None else lint.check(text, filename)


@functools.lru_cache(maxsize=8)
def _outline(text: str) -> outline.Outline | None:
    return outline.scan(text)


def _functions(blocks: Iterable[Block]) -> list[Block]:
    """The functions of an outline: the module's and its classes' (at any depth), in order."""
    out: list[Block] = []
    for block in blocks:
        if block.kind == "function":
            out.append(block)
        else:
            out.extend(_functions(block.body))
    return out


def _cut(lines: list[str], functions: list[Block], keep: Block) -> str | None:
    """The text with every function but `keep` cut down, each line keeping its number: to an assignment
    to its name, so that the module binds the same names while pyflakes spends nothing on it (a stub
    keeping its header cost 80% of a pass over a module of small functions); a decorated one to its
    decorators over `def name(): ...` (a decorator such as `typing.overload` changes what pyflakes says
    of the next function of that name). None if a decorated function's `def` line is not found."""
    out = list(lines)
    for block in functions:
        if block is keep:
            continue
        first = out[block.start - 1]
        indent = first[:len(first) - len(first.lstrip(" "))]
        row = block.start - 1
        if first.lstrip(" ").startswith("@"):
            row = next((r for r in range(block.start - 1, block.header_end) if out[r].startswith(indent)
                        and out[r][len(indent):].startswith(("def ", "async def "))), -1)
            if row < 0:
                return None
            out[row] = f"{indent}def {block.name}(): ..."
        else:
            out[row] = f"{indent}{block.name} = 0"
        for r in range(row + 1, block.end):
            out[r] = ""
    return "\n".join(out)


def _named_elsewhere(problem: Problem, lines: list[str], functions: list[Block], keep: Block) -> bool:
    """Whether a function other than `keep` holds a word of the import `problem` says is unused."""
    quoted = problem.message[:-len(_UNUSED_IMPORT)]
    words = set(_WORD.findall(quoted))
    if not words or "*" in quoted:    # any undefined name marks a star import used, not its own words
        return True
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(words))) + r")\b")
    return any(pattern.search("\n".join(lines[f.start - 1:f.end])) for f in functions if f is not keep)


def _redefines_an_import(problem: Problem, lines: list[str]) -> bool:
    """Whether `problem` is a redefinition of an import: pyflakes may report it with the import's being
    unused, which the function bodies decide (other redefinitions depend on one scope alone)."""
    if not problem.message.startswith(_REDEFINED):
        return False
    origin = _ORIGIN.search(problem.message)
    if origin is None or not 0 < int(origin.group(1)) <= len(lines):
        return True
    return bool(_IMPORT.match(lines[int(origin.group(1)) - 1]))


def _binds_in_a_header(lines: list[str], functions: list[Block]) -> bool:
    """Whether a `:=` in a function's header (decorators, defaults, annotations: evaluated by the module)
    may bind a name there."""
    return any(":=" in "\n".join(lines[f.start - 1:f.header_end]) for f in functions)


def derive(before: str, old: tuple[Problem, ...], after: str, filename: str) -> tuple[Problem, ...] | None:
    """`after`'s problems from `before`'s (`old`) and the two cut-down modules, or None when only a whole
    pass can tell (see the module's docstring). In four steps, each of which may answer None:

    1. the edit changed the lines of one function F and only moved the others (`_one_function_edit`);
    2. the module before and after, every function but F cut down, checked (`_cut_problems`);
    3. the module's own unused imports after the edit worked out (`_unused_imports`);
    4. the answer: the old problems outside F (moved with its lines), F's own, those unused imports.
    """
    if before == after:
        return old
    if any(lint.is_syntax_error(p) for p in old) or _GLOBAL.search(before) or _GLOBAL.search(after):
        return None
    edit = _one_function_edit(before, after)
    cuts = _cut_problems(edit, old, filename) if edit is not None else None
    if edit is None or cuts is None:
        return None
    cut_before, cut_after = cuts
    unused_now = _unused_imports(edit, old, cut_before, cut_after)
    if unused_now is None:
        return None
    kept = [Problem(edit.shifted(p.line), p.message, p.blocking, p.key) for p in _rest(old, edit.edited, edit.olds)]
    inside = [p for p in cut_after if edit.again.start <= p.line <= edit.again.end]
    return tuple(sorted((*kept, *unused_now, *inside), key=lambda p: p.line))


@dataclass(frozen=True)
class _Edit:
    """An edit inside one function: the lines before and after, the functions before and after, the
    edited function before (`edited`) and after (`again`), and how many lines the edit added."""

    was: list[str]
    now: list[str]
    olds: list[Block]
    news: list[Block]
    edited: Block
    again: Block
    moved: int

    def shifted(self, line: int) -> int:
        """Where an old line past the edited function is after the edit."""
        return line + self.moved if line > self.edited.end else line


def _one_function_edit(before: str, after: str) -> _Edit | None:
    """The edit, if it changed the lines of one function and nothing else moved but by the lines it added."""
    was, now = before.split("\n"), after.split("\n")
    head = 0
    limit = min(len(was), len(now))
    while head < limit and was[head] == now[head]:
        head += 1
    tail = 0
    while tail < limit - head and was[-1 - tail] == now[-1 - tail]:
        tail += 1
    first, last_was = head + 1, len(was) - tail     # the lines the edit replaced (none: an insertion)
    moved = len(now) - len(was)
    old_outline, new_outline = _outline(before), _outline(after)
    if old_outline is None or new_outline is None:
        return None
    olds, news = _functions(old_outline), _functions(new_outline)
    edited = next((f for f in olds if f.header_end and f.start <= first and max(last_was, first - 1) <= f.end),
                  None)
    if edited is None or len(olds) != len(news):
        return None
    again = news[olds.index(edited)]
    if (again.start, again.end, again.name) != (edited.start, edited.end + moved, edited.name):
        return None
    edit = _Edit(was, now, olds, news, edited, again, moved)
    if any((n.start, n.end, n.name) != (edit.shifted(o.start), edit.shifted(o.end), o.name)
           for o, n in zip(olds, news, strict=True) if o is not edited):
        return None
    if (":=" in before or ":=" in after) and (_binds_in_a_header(was, olds) or _binds_in_a_header(now, news)):
        return None
    return edit


def _cut_problems(edit: _Edit, old: tuple[Problem, ...], filename: str
                  ) -> tuple[tuple[Problem, ...], tuple[Problem, ...]] | None:
    """The problems of the cut-down modules before and after, unless one cannot be cut, has a syntax
    error, or a redefinition of an import is reported (before, or in either cut module)."""
    cut_was, cut_now = _cut(edit.was, edit.olds, edit.edited), _cut(edit.now, edit.news, edit.again)
    if cut_was is None or cut_now is None:
        return None
    cut_before, cut_after = lint.problems_of(cut_was, filename), lint.problems_of(cut_now, filename)
    if any(lint.is_syntax_error(p) for p in (*cut_before, *cut_after)) or \
            any(_redefines_an_import(p, lines) for found, lines in ((old, edit.was), (cut_before, edit.was),
                                                                    (cut_after, edit.now))
                for p in found):
        return None
    return cut_before, cut_after


def _unused_imports(edit: _Edit, old: tuple[Problem, ...], cut_before: tuple[Problem, ...],
                    cut_after: tuple[Problem, ...]) -> list[Problem] | None:
    """The module's own unused imports after the edit, as the whole file before and the two cut modules
    tell (see the module's docstring), or None when they cannot."""
    whole_before = _module_imports(old, edit.olds, edit.shifted)
    cut_before_unused = _module_imports(cut_before, edit.olds, edit.shifted)
    cut_after_unused = _module_imports(cut_after, edit.news, None)
    if whole_before is None or cut_before_unused is None or cut_after_unused is None:
        return None
    if not whole_before.keys() <= cut_before_unused.keys() or \
            _places(_rest(cut_before, edit.edited, edit.olds), edit.shifted) != \
            _places(_rest(cut_after, edit.again, edit.news), None):
        return None   # not as the reasoning above has it: let the whole file answer
    unused_now: list[Problem] = []
    for key in {**whole_before, **cut_before_unused, **cut_after_unused}:
        if key in whole_before:
            if key in cut_after_unused:
                unused_now.append(cut_after_unused[key])
        elif key not in cut_before_unused and key in cut_after_unused:
            # F alone used it, as far as the cut module shows, and uses it no more: unused, if no other
            # function so much as names it (the words of the import: `os.path`, `a.b as c`)
            if _named_elsewhere(cut_after_unused[key], edit.now, edit.news, edit.again):
                return None
            unused_now.append(cut_after_unused[key])
    return unused_now


def _in_module_code(line: int, functions: list[Block], starts: list[int]) -> bool:
    at = bisect_right(starts, line) - 1
    return at < 0 or line > functions[at].end


def _module_imports(found: tuple[Problem, ...], functions: list[Block],
                    shift: Callable[[int], int] | None) -> dict[tuple[str, int], Problem] | None:
    """The module's own unused imports (not a function's: those are the function's problems), keyed by
    what they say and their line (`shift`ed to the text after the edit when given)."""
    starts = [f.start for f in functions]
    picked = [p for p in found if p.message.endswith(_UNUSED_IMPORT) and _in_module_code(p.line, functions, starts)]
    keyed = {(p.same_as, shift(p.line) if shift else p.line): p for p in picked}
    return keyed if len(keyed) == len(picked) else None   # the same message twice on a line: leave it


def _rest(found: tuple[Problem, ...], where: Block, functions: list[Block]) -> list[Problem]:
    """What is neither in `where` nor one of the module's unused imports."""
    starts = [f.start for f in functions]
    return [p for p in found if not where.start <= p.line <= where.end
            and not (p.message.endswith(_UNUSED_IMPORT) and _in_module_code(p.line, functions, starts))]


def _places(found: list[Problem], shift: Callable[[int], int] | None) -> list[tuple[str, int]]:
    return sorted((p.same_as, shift(p.line) if shift else p.line) for p in found)

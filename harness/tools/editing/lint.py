"""The lint gate: pyflakes on a Python file's text before and after an edit.

Problems are compared by message, ignoring line numbers (an edit shifts lines), also those a
message quotes ("redefinition of unused 'os' from line 2"), as multisets: a
second "undefined name 'x'" is new even if one was there before. Only errors block an edit
(syntax errors, undefined names, misplaced return/yield/break, ...); warnings such as an unused
import are reported but never block, because a multi-step change often adds an import first and
its use a step later. The gate runs in the harness process on the text, so a rejected edit is
never written. It calls `lint_delta.compare`, which answers as `compare` here does, without a pass
over the whole file when the edit is inside one function.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
import re
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from pyflakes import checker, messages

_WARNING_NAMES = ("UnusedImport", "UnusedVariable", "UnusedAnnotation", "UnusedIndirectAssignment",
                  "RedefinedWhileUnused", "ImportShadowedByLoopVar", "ImportStarUsed", "ImportStarUsage",
                  "FStringMissingPlaceholders")
WARNING_TYPES: tuple[type, ...] = tuple(getattr(messages, n) for n in _WARNING_NAMES if hasattr(messages, n))


@dataclass(frozen=True)
class Problem:
    line: int
    message: str
    blocking: bool
    key: str = ""        # what `compare` matches on: the message with the line numbers it quotes masked

    @property
    def same_as(self) -> str:
        return self.key or self.message

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


_PARSE_LOCK = threading.Lock()
_GC_LOCK = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while a large syntax tree is built and walked.

    Building the tree of a 10,000-line file allocates about 100,000 objects, none in a cycle, and
    the collector's passes over them doubled `ast.parse`'s time (94-102 ms, 42 ms with the collector
    off); a django-sized analysis for find_code took 27% less. Process-wide and safe to nest across
    threads: the collector comes back when the last pause ends, if it was on when the first began;
    cycles made meanwhile are collected then."""
    global _gc_pauses, _gc_was_enabled
    with _GC_LOCK:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def parse_python(text: str, filename: str = "<file>") -> ast.Module:
    """`ast.parse`, one call at a time in this process: CPython 3.11 before 3.11.8 shares the AST
    constructor's recursion counter between threads and then fails at random with "SystemError: AST
    constructor recursion depth mismatch" (python/cpython#106905); batch evaluation runs sessions
    in threads."""
    with _PARSE_LOCK:
        return ast.parse(text, filename=filename)


@functools.lru_cache(maxsize=8)
def check(text: str, filename: str = "<file>") -> tuple[Problem, ...]:
    """Every pyflakes problem in `text`; a syntax error is one blocking problem.

    Cached: the text after one edit is the text before the next.
    """
    return problems_of(text, filename)


def problems_of(text: str, filename: str = "<file>") -> tuple[Problem, ...]:
    """`check` without its cache: for texts that are not the next edit's (`lint_delta`'s reductions)."""
    with gc_paused():
        try:
            tree = parse_python(text, filename)
        except SyntaxError as exc:
            return (Problem(exc.lineno or 1, f"syntax error: {exc.msg}", True),)
        except ValueError as exc:   # e.g. source holds NUL bytes
            return (Problem(1, f"cannot be parsed: {exc}", True),)
        found = checker.Checker(tree, filename=filename)
        problems = tuple(Problem(m.lineno, m.message % m.message_args, not isinstance(m, WARNING_TYPES), _key(m))
                         for m in sorted(found.messages, key=lambda m: m.lineno))
        _release(found)
        del tree, found
    return problems


def _release(found: checker.Checker) -> None:
    """Break the reference cycles a finished pyflakes run leaves, so that its tree and bindings are
    freed at once instead of by the cyclic collector.

    The checker caches its node handlers as bound methods of itself, and each binding's `used`
    names its scope: the whole tree (about 100,000 objects, 18 MB for 10,000 lines) stayed behind as
    cyclic garbage after every check, until a full collection. Freed at once, the next check reuses
    that memory instead of faulting in new pages: a gated edit took about 9% less here."""
    for scope in [*getattr(found, "deadScopes", ()), *getattr(found, "scopeStack", ())]:
        if isinstance(scope, dict):
            scope.clear()
    found.__dict__.clear()


_CONVERSION = re.compile(r"%[%rsdi]")


def _key(m: messages.Message) -> str:
    """`m`'s text with each line number it quotes ("from line 12", "on line 3") as `?`. Some messages
    name the line of an earlier definition, so an edit that only moves lines would otherwise turn an
    old problem into a new one: an old "local variable 'x' defined in enclosing scope on line 2
    referenced before assignment", an error, blocked an edit that added a comment above it."""
    args = m.message_args if isinstance(m.message_args, tuple) else (m.message_args,)
    masked = list(args)
    conversions = [c for c in _CONVERSION.finditer(m.message) if c.group() != "%%"]
    for index, conversion in enumerate(conversions[:len(masked)]):
        if m.message[:conversion.start()].endswith("line "):
            masked[index] = "?"
    try:
        return str(m.message % tuple(masked))
    except (TypeError, ValueError):
        return str(m.message % m.message_args)


@dataclass(frozen=True)
class LintVerdict:
    new_errors: list[Problem]
    new_warnings: list[Problem]
    old_count: int               # problems that were there before the edit (not blocking)

    @property
    def blocked(self) -> bool:
        return bool(self.new_errors)


def compare(before: str, after: str, filename: str = "<file>") -> LintVerdict:
    """The problems `after` has that `before` did not, split into errors and warnings."""
    return verdict(check(before, filename), check(after, filename))


def is_syntax_error(problem: Problem) -> bool:
    return problem.message.startswith(("syntax error", "cannot be parsed"))


def verdict(old: tuple[Problem, ...], after: tuple[Problem, ...]) -> LintVerdict:
    """What `compare` says of the problems of a text before (`old`) and after an edit."""
    old_left = Counter(p.same_as for p in old)
    new: list[Problem] = []
    for problem in after:
        if old_left[problem.same_as] > 0:
            old_left[problem.same_as] -= 1
        else:
            new.append(problem)
    if any(p.message.startswith("syntax error") for p in old):
        # The old version did not parse, so its other problems were unknown: only a syntax error
        # in the new version can be told apart as new.
        new = [p if p.message.startswith("syntax error") else Problem(p.line, p.message, False)
               for p in new]
    return LintVerdict([p for p in new if p.blocking], [p for p in new if not p.blocking], len(old))

"""Per-test statuses from a test runner's log, one parser per runner style, read as SWE-bench reads them.

The behaviour follows SWE-bench's harness (`swebench/harness/log_parsers/python.py` at commit 7a21e05,
August 2026), quirks included, so that a status map here is the status map the official grading sees:

    pytest           ``STATUS id`` lines of pytest's ``-rA`` short summary; the id is the second word
                     (a parametrised id with a space is cut at the space); ``FAILED id - message`` drops
                     the message; ``SKIPPED [N] file:line: reason`` is a skip summary, not a test
    pytest_options   as pytest, but an id with ``[...]`` keeps only the text up to the last ``]``, and a
                     parameter that is an absolute path (one ``/``, no ``*``) shrinks to its last part
    pytest_v2        as pytest, after removing ``[<digits>m`` colour codes and every control character
                     (tab included); the id is the rest of the line (spaces kept; ``FAILED`` lines cut at
                     the first `` - ``); a line ending with a status is ``id STATUS`` (older pytest ``-v``)
    django           ``runtests.py --verbosity 2``: ``name ... ok|OK|skipped|FAIL|ERROR``; ``FAIL: name``
                     and ``ERROR: name`` headers (their first word only); an ``ok`` line on its own
                     passes the last ``name ...`` seen (a docstring or output printed in between); three
                     known interleavings of django's own output, and django-7188's migration line
    sympy            ``bin/test --verbose``: ``test_name ok|F|E`` lines; a ``___ path.py:name ___``
                     failure header records ``path.py:name`` as FAILED
    seaborn          only PASSED and FAILED: ``FAILED id``, ``PASSED id`` and ``id PASSED ...``
    matplotlib       as pytest, with ``MouseButton.LEFT`` / ``RIGHT`` read as 1 / 3 in ids

Aliases name the parser of each repository, as the official registry does: astroid, flask, marshmallow,
pvlib, pyvista, sqlfluff, xarray -> pytest; pydicom, requests, pylint -> pytest_options; astropy, scikit,
sphinx -> pytest_v2. The official registry's key is ``parse_log_<name>``.

Lines are split on ``\\n`` only (a ``\\r`` stays in its line), and the last line about a test wins.
One departure: a bare ``FAIL:`` or ``ERROR:`` line in a django log, on which the official parser raises
IndexError, is skipped here. A log of a stand-in interpreter reads as the requested one's: the stand-in
prints as the requested version does (`harness/container_scripts/standin.py`), not the parser.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType

from harness.errors import TaskError

__all__ = ["PARSERS", "Parser", "TestStatus", "UnknownParserError", "parse_log", "parser_named", "runner_summary"]


class TestStatus(enum.StrEnum):
    """The statuses SWE-bench's grading knows (XPASS is not one of them)."""

    __test__ = False      # not a pytest test class

    PASSED = "PASSED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    ERROR = "ERROR"
    XFAIL = "XFAIL"


Parser = Callable[[str], dict[str, str]]

_STATUS_WORDS = tuple(s.value for s in TestStatus)
_REGISTRY_PREFIX = "parse_log_"      # SWE-bench's registry key of each parser: parse_log_<name>
_SKIP_COUNT = re.compile(r"\[\d+\]")
_BRACKETED = re.compile(r"(.*?)\[(.*)\]")
_COLOUR_CODE = re.compile(r"\[\d+m")
_CONTROL_CHARS = str.maketrans("", "", "".join(chr(c) for c in range(1, 32)))


class UnknownParserError(TaskError):
    """A log parser name that no parser answers to (`.name`; the message lists the known ones)."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"unknown log parser {name!r}; known parsers: {', '.join(sorted(PARSERS))}, each also "
                         "as SWE-bench's registry names it, parse_log_<name> (e.g. \"django\" or "
                         "\"parse_log_django\" for django's runtests.py, \"pytest\" for pytest -rA output)")


def parse_log(parser: str, log: str) -> dict[str, str]:
    """Map each test found in `log` to its status (a `TestStatus` value), read by the parser `parser`.

    Raises:
        UnknownParserError: `parser` is not a key of `PARSERS`.
    """
    try:
        read = PARSERS[parser]
    except KeyError:
        raise UnknownParserError(parser) from None
    return read(log)


def parser_named(name: object) -> str:
    """The key of `PARSERS` that `name` names: a key itself, or SWE-bench's registry name of it
    (``parse_log_django`` -> ``django``), as SWE-bench 5.0 rows give it in their `log_parser` field.

    Raises:
        UnknownParserError: `name` names no parser (the message lists the known ones).
    """
    if isinstance(name, str):
        key = name.removeprefix(_REGISTRY_PREFIX)
        if key in PARSERS:
            return key
    raise UnknownParserError(str(name)[:120])


def _is_skip_summary(words: list[str]) -> bool:
    """``SKIPPED [3] file:line: reason``: a count of skips, not a test named ``[3]``."""
    return words[0] == TestStatus.SKIPPED.value and _SKIP_COUNT.fullmatch(words[1]) is not None


def _summary_words(line: str) -> list[str] | None:
    """The words of a ``STATUS id ...`` line, or None for any other line (or a skip summary)."""
    if not line.startswith(_STATUS_WORDS):
        return None
    if line.startswith(TestStatus.FAILED.value):
        line = line.replace(" - ", " ")
    words = line.split()
    if len(words) < 2 or _is_skip_summary(words):
        return None
    return words


def parse_pytest(log: str) -> dict[str, str]:
    """pytest ``-rA`` short summary lines: ``STATUS id``."""
    results: dict[str, str] = {}
    for line in log.split("\n"):
        words = _summary_words(line)
        if words is not None:
            results[words[1]] = words[0]
    return results


def _shorten_options(test_id: str) -> str:
    match = _BRACKETED.search(test_id)
    if match is None:
        return test_id
    head, option = match.groups()
    if option.startswith("/") and not option.startswith("//") and "*" not in option:
        option = "/" + option.rsplit("/", 1)[-1]
    return f"{head}[{option}]"


def parse_pytest_options(log: str) -> dict[str, str]:
    """As `parse_pytest`, with parametrised ids normalised by `_shorten_options`."""
    results: dict[str, str] = {}
    for line in log.split("\n"):
        words = _summary_words(line)
        if words is not None:
            results[_shorten_options(words[1])] = words[0]
    return results


def parse_pytest_v2(log: str) -> dict[str, str]:
    """Later pytest output: whole-line ids, colour codes and control characters removed, and the
    ``id STATUS`` lines of older pytest versions."""
    results: dict[str, str] = {}
    for raw in log.split("\n"):
        line = _COLOUR_CODE.sub("", raw).translate(_CONTROL_CHARS)
        if line.startswith(_STATUS_WORDS):
            if line.startswith(TestStatus.FAILED.value):
                line = line.split(" - ", 1)[0]
            words = line.split()
            if len(words) >= 2 and not _is_skip_summary(words):
                results[" ".join(words[1:])] = words[0]
        elif line.endswith(_STATUS_WORDS):
            words = line.split()
            if len(words) >= 2:
                results[" ".join(words[:-1])] = words[-1]
    return results


def parse_matplotlib(log: str) -> dict[str, str]:
    """As `parse_pytest`, with mouse-button enum names in ids read as their numbers."""
    return parse_pytest(log.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3"))


def parse_seaborn(log: str) -> dict[str, str]:
    """Only passes and failures: ``FAILED id``, ``PASSED id`` and ``id PASSED ...`` lines."""
    results: dict[str, str] = {}
    for line in log.split("\n"):
        words = line.split()
        if len(words) < 2:
            continue
        if line.startswith(TestStatus.FAILED.value):
            results[words[1]] = TestStatus.FAILED.value
        elif " PASSED " in line:
            if words[1] == TestStatus.PASSED.value:
                results[words[0]] = TestStatus.PASSED.value
        elif line.startswith(TestStatus.PASSED.value):
            results[words[1]] = TestStatus.PASSED.value
    return results


_SYMPY_FAILURE_HEADER = re.compile(r"(_*) (.*)\.py:(.*) (_*)")
_SYMPY_ENDINGS = ((" E", TestStatus.ERROR), (" F", TestStatus.FAILED), (" ok", TestStatus.PASSED))


def parse_sympy(log: str) -> dict[str, str]:
    """sympy ``bin/test --verbose``: ``test_name ok|F|E`` lines, and ``path.py:name`` failure headers."""
    results: dict[str, str] = {}
    for _, path, name, _ in _SYMPY_FAILURE_HEADER.findall(log):
        results[f"{path}.py:{name}"] = TestStatus.FAILED.value
    for raw in log.split("\n"):
        line = raw.strip()
        if not line.startswith("test_"):
            continue
        for ending, status in _SYMPY_ENDINGS:
            if line.endswith(ending):
                results[line.split()[0]] = status.value
    return results


_DJANGO_PASS_ENDINGS = (" ... ok", " ... OK", " ...  OK")
_DJANGO_MIGRATION_LINE = "Applying sites.0002_alter_domain_unique...test_no_migrations"
_DJANGO_VERSION_TEST = "--version is equivalent to version"
_DJANGO_INTERRUPTED = tuple(re.compile(p, re.MULTILINE) for p in (
    r"^(.*?)\s\.\.\.\sTesting against Django installed in (?s:.*?) silenced\)\.\nok$",
    r"^(.*?)\s\.\.\.\sInternal Server Error: /.*/\nok$",
    r"^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$",
))


def parse_django(log: str) -> dict[str, str]:
    """django ``tests/runtests.py --verbosity 2`` output."""
    results: dict[str, str] = {}
    last_started: str | None = None
    for raw in log.split("\n"):
        line = raw.strip()
        if _DJANGO_VERSION_TEST in line:
            results[_DJANGO_VERSION_TEST] = TestStatus.PASSED.value
        if " ... " in line:
            last_started = line.split(" ... ")[0]
        _django_line(line, results)
        if line.startswith("ok") and last_started is not None:
            results[last_started] = TestStatus.PASSED.value
    for pattern in _DJANGO_INTERRUPTED:
        for match in pattern.finditer(log):
            results[match.group(1)] = TestStatus.PASSED.value
    return results


def _django_line(line: str, results: dict[str, str]) -> None:
    """The statuses one stripped line of django's output gives (several checks may apply)."""
    ending = next((e for e in _DJANGO_PASS_ENDINGS if line.endswith(e)), None)
    if ending is not None:
        if line.startswith(_DJANGO_MIGRATION_LINE):
            line = line.split("...", 1)[-1].strip()
        results[line.rsplit(ending, 1)[0]] = TestStatus.PASSED.value
    if " ... skipped" in line:
        results[line.split(" ... skipped")[0]] = TestStatus.SKIPPED.value
    for ending, header, status in ((" ... FAIL", "FAIL:", TestStatus.FAILED),
                                   (" ... ERROR", "ERROR:", TestStatus.ERROR)):
        if line.endswith(ending):
            results[line.split(ending)[0]] = status.value
        words = line.split()
        if line.startswith(header) and len(words) > 1:
            results[words[1]] = status.value


# The line each runner prints once it has run the suite, with a count that is not zero (a run of no
# test is no sign the suite ran): pytest's ``N passed, M failed in 1.2s`` (``in 1.2 seconds`` before
# pytest 5), django's ``Ran N tests in 0.2s``, sympy's ``tests finished: N passed, ...``.
_PYTEST_SUMMARY = re.compile(r"^=*[ ]*((?:\d+ [a-z]+, )*\d+ [a-z]+) in \d+(?:\.\d+)?(?:s| seconds)\b", re.MULTILINE)
_PYTEST_COUNTED = frozenset({"passed", "failed", "error", "errors", "skipped", "xfailed", "xpassed"})
_DJANGO_SUMMARY = re.compile(r"^Ran [1-9]\d* tests? in \d+(?:\.\d+)?s$", re.MULTILINE)
_SYMPY_SUMMARY = re.compile(r"^=*[ ]*(tests finished: [^\n]*?\b[1-9]\d* [a-z][^\n]*)", re.MULTILINE)


def _pytest_summary(log: str) -> str | None:
    text = _COLOUR_CODE.sub("", log).translate(str.maketrans("", "", "".join(chr(c) for c in range(1, 32)
                                                                         if c != 10)))
    found = None
    for match in _PYTEST_SUMMARY.finditer(text):
        counts = [part.split(" ", 1) for part in match.group(1).split(", ")]
        if any(int(n) > 0 and word in _PYTEST_COUNTED for n, word in counts):
            found = match.group(0).strip("= ")
    return found


def _last(pattern: re.Pattern[str]) -> Callable[[str], str | None]:
    def find(log: str) -> str | None:
        matches = pattern.findall(log)
        return str(matches[-1]).strip("= ") if matches else None
    return find


RUNNER_SUMMARIES: Mapping[str, tuple[str, Callable[[str], str | None]]] = MappingProxyType({
    "pytest": ("pytest's `N passed in 1.2s` line", _pytest_summary),
    "django": ("django's `Ran N tests in 0.2s` line", _last(_DJANGO_SUMMARY)),
    "sympy": ("sympy's `tests finished: N passed, ...` line", _last(_SYMPY_SUMMARY)),
})
"""Per runner style: what its summary line is, and a finder of the last one in a log (None without)."""


def runner_summary(parser: str, log: str) -> tuple[str, str | None] | None:
    """(what the runner's summary line is, the last one in `log` or None) for the runner behind the log
    parser `parser`; None for a parser whose runner has no known summary line."""
    read = PARSERS.get(parser)
    style = "pytest" if read in _PYTEST_STYLE else "django" if read is parse_django else \
        "sympy" if read is parse_sympy else None
    if style is None:
        return None
    what, find = RUNNER_SUMMARIES[style]
    return what, find(log)


PARSERS: Mapping[str, Parser] = MappingProxyType({
    "pytest": parse_pytest,
    "pytest_options": parse_pytest_options,
    "pytest_v2": parse_pytest_v2,
    "django": parse_django,
    "sympy": parse_sympy,
    "seaborn": parse_seaborn,
    "matplotlib": parse_matplotlib,
    **dict.fromkeys(("astroid", "flask", "marshmallow", "pvlib", "pyvista", "sqlfluff", "xarray"), parse_pytest),
    **dict.fromkeys(("pydicom", "requests", "pylint"), parse_pytest_options),
    **dict.fromkeys(("astropy", "scikit", "sphinx"), parse_pytest_v2),
})

_PYTEST_STYLE = (parse_pytest, parse_pytest_options, parse_pytest_v2, parse_seaborn, parse_matplotlib)

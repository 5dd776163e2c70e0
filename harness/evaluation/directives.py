"""The test files a test patch touches, as the arguments each test runner takes (SWE-bench's directives).

As SWE-bench's harness does (`get_test_directives` in `swebench/harness/test_spec/python.py`, last
changed in 03b6fa9, June 2026): every file the patch touches, in patch order (for a deleted file its
old path, for a renamed one its new path), except files ending in ``.json``, ``.png``, ``csv``,
``.txt``, ``.md``, ``.jpg``, ``.jpeg``, ``.pkl``, ``.yml``, ``.yaml`` or ``.toml``; then per runner:

    pytest, sympy, tox   the paths as they are (``sympy/core/tests/test_basic.py``)
    django               ``tests/runtests.py`` labels: only test files (named ``tests.py`` or ``test_*``,
                         or under a ``tests/`` or ``test_*`` folder below the top), ``.py`` and a leading
                         ``tests/`` removed, ``/`` made ``.`` (``tests/auth_tests/test_forms.py`` ->
                         ``auth_tests.test_forms``)

The test patch is hostile: every directive becomes a command-line argument, so each must be a relative
path of plain names (letters, digits, ``_ . + @ , -``, not starting with ``-``, no ``.``/``..`` part)
or, for django, a dotted label of such names; otherwise `TaskError` lists every offending directive.
"""

from __future__ import annotations

import posixpath
import re

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from harness.errors import TaskError

__all__ = ["RUNNERS", "test_directives"]

RUNNERS = ("pytest", "sympy", "tox", "django")
_NON_TEST_ENDINGS = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")
_NAME = re.compile(r"[A-Za-z0-9_.+@,][A-Za-z0-9_.+@,-]*")


def test_directives(test_patch: str, runner: str) -> list[str]:
    """The directives of `test_patch` for `runner` (one of `RUNNERS`), in patch order.

    Raises:
        TaskError: `runner` is unknown, the patch cannot be read, or a directive is not a safe name.
    """
    if runner not in RUNNERS:
        raise TaskError(f"unknown test runner {runner!r}; known runners: {', '.join(RUNNERS)} "
                        "(e.g. \"django\" for tests/runtests.py labels, \"pytest\" for file paths)")
    paths = [p for p in _touched_paths(test_patch) if not p.endswith(_NON_TEST_ENDINGS)]
    _check_paths(paths)
    if runner == "django":
        return [_django_label(p) for p in paths if _is_django_test_file(p)]
    return paths


test_directives.__test__ = False      # type: ignore[attr-defined]  # not a pytest test function


def _touched_paths(test_patch: str) -> list[str]:
    try:
        patch = PatchSet(test_patch)
    except UnidiffParseError as exc:
        raise TaskError(f"the test patch is not a unified diff ({exc}); expected git diff output, e.g. "
                        "\"diff --git a/tests/test_x.py b/tests/test_x.py\" followed by its hunks") from exc
    return [str(patched.path) for patched in patch]


def _check_paths(paths: list[str]) -> None:
    """Refuse, all at once, every path that could be read as an option or leave the project."""
    bad = [p for p in paths if not all(_NAME.fullmatch(part) and part not in (".", "..") for part in p.split("/"))]
    if bad:
        raise TaskError(f"the test patch touches files that cannot be passed to a test runner: {bad!r}; "
                        "expected relative paths of plain names (letters, digits, '_', '.', '+', '@', ',', '-'; "
                        "no part starting with '-', no '.' or '..' part), e.g. \"tests/test_core.py\"")


def _is_django_test_file(path: str) -> bool:
    name = posixpath.basename(path)
    return name == "tests.py" or name.startswith("test_") or "/tests/" in path or "/test_" in path


def _django_label(path: str) -> str:
    label = path.removesuffix(".py")
    label = label.removeprefix("tests/")
    return label.replace("/", ".")

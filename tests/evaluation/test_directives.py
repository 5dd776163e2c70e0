"""A test patch becomes the runner's arguments as in SWE-bench, and never a command-line option."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.errors import TaskError
from harness.evaluation import directives

ROWS: dict[str, Any] = json.loads((Path(__file__).parent / "data" / "logs" / "rows.json").read_text(encoding="utf-8"))


def diff(*paths: str) -> str:
    """A git diff adding one line to each of `paths`."""
    return "".join(f"diff --git a/{p} b/{p}\n--- a/{p}\n+++ b/{p}\n@@ -1 +1,2 @@\n x = 1\n+y = 2\n" for p in paths)


def test_django_patch_becomes_dotted_labels_without_its_models_modules() -> None:
    """django-13551 (a real row) touches a models package and two test modules; runtests.py gets
    the test modules only, as SWE-bench's `get_test_directives` gives them."""
    patch = ROWS["django__django-13551"]["test_patch"]
    assert directives.test_directives(patch, "django") == ["auth_tests.test_models", "auth_tests.test_tokens"]
    assert directives.test_directives(ROWS["django__django-11099"]["test_patch"], "django") == [
        "auth_tests.test_validators"]


def test_django_patch_drops_data_files_and_keeps_nested_test_modules() -> None:
    assert directives.test_directives(ROWS["django__django-12915"]["test_patch"], "django") == [
        "asgi.tests", "staticfiles_tests.test_handlers"]
    assert directives.test_directives(diff("tests/backends/base/test_creation.py", "tests/backends/models.py"),
                                      "django") == ["backends.base.test_creation"]


def test_sympy_and_pytest_take_the_paths_in_patch_order() -> None:
    assert directives.test_directives(ROWS["sympy__sympy-20590"]["test_patch"], "sympy") == [
        "sympy/core/tests/test_basic.py"]
    assert directives.test_directives(ROWS["pytest-dev__pytest-5227"]["test_patch"], "pytest") == [
        "testing/logging/test_reporting.py"]
    patch = diff("tests/test_b.py", "tests/roots/conf.py", "tests/data/expected.json", "docs/notes.md")
    assert directives.test_directives(patch, "pytest") == ["tests/test_b.py", "tests/roots/conf.py"]


def test_deleted_and_renamed_files_count_by_the_name_git_shows_after_b() -> None:
    deleted = "diff --git a/tests/test_old.py b/tests/test_old.py\ndeleted file mode 100644\n" \
              "--- a/tests/test_old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x = 1\n"
    renamed = "diff --git a/tests/test_a.py b/tests/test_b.py\nsimilarity index 90%\n" \
              "rename from tests/test_a.py\nrename to tests/test_b.py\n--- a/tests/test_a.py\n" \
              "+++ b/tests/test_b.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    assert directives.test_directives(deleted + renamed, "pytest") == ["tests/test_old.py", "tests/test_b.py"]


@pytest.mark.parametrize("path", ["--pdb", "tests/-k", "../outside/test_x.py", "tests/../../test_x.py",
                                  "tests/test x.py", "tests/test_$(id).py", "tests/test_`id`.py", "tests/./test_x.py"])
def test_hostile_path_is_refused_before_it_becomes_an_argument(path: str) -> None:
    patch = diff("tests/test_ok.py", path)
    for runner in ("pytest", "django"):
        with pytest.raises(TaskError) as caught:
            directives.test_directives(patch, runner)
        assert repr(path) in str(caught.value) and "tests/test_ok.py" not in str(caught.value)
    assert directives.test_directives(diff("tests/test_ok.py"), "pytest") == ["tests/test_ok.py"]   # control


def test_every_bad_path_is_listed_in_one_error() -> None:
    with pytest.raises(TaskError, match=r"\['-x', '--collect-only'\]"):
        directives.test_directives(diff("-x", "tests/test_ok.py", "--collect-only"), "sympy")


def test_unknown_runner_and_unreadable_patch_are_task_errors() -> None:
    with pytest.raises(TaskError, match=r"unknown test runner 'nose'.*django"):
        directives.test_directives(diff("tests/test_ok.py"), "nose")
    with pytest.raises(TaskError, match="not a unified diff"):
        directives.test_directives("--- a/x\n+++ b/x\n@@ -1 +1 @@\n", "pytest")
    assert directives.test_directives("", "pytest") == []

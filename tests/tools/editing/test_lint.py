"""The lint gate compares pyflakes problems by message, so only new errors block."""

from __future__ import annotations

import gc

from harness.tools.editing.lint import check, compare


def test_new_undefined_name_blocks_with_its_line() -> None:
    verdict = compare("def f(x):\n    return x\n", "def f(x):\n    return y\n")
    assert verdict.blocked
    assert [str(p) for p in verdict.new_errors] == ["line 2: undefined name 'y'"]


def test_preexisting_error_does_not_block_even_when_lines_shift() -> None:
    before = "x = undefined_thing\n"
    after = "import os\n\nprint(os.sep)\nx = undefined_thing\n"
    verdict = compare(before, after)
    assert not verdict.blocked and verdict.old_count == 1


def test_a_second_copy_of_an_old_error_is_new() -> None:
    verdict = compare("a = missing\n", "a = missing\nb = missing\n")
    assert [str(p) for p in verdict.new_errors] == ["line 2: undefined name 'missing'"]


def test_syntax_error_blocks() -> None:
    verdict = compare("x = 1\n", "x = (1\n")
    assert verdict.blocked and verdict.new_errors[0].message.startswith("syntax error")


def test_unused_import_is_a_warning_not_a_blocker() -> None:
    verdict = compare("x = 1\n", "import os\nx = 1\n")
    assert not verdict.blocked
    assert [str(p) for p in verdict.new_warnings] == ["line 1: 'os' imported but unused"]


def test_fixing_a_syntax_error_does_not_block_on_newly_visible_names() -> None:
    verdict = compare("def f(:\n    return y\n", "def f():\n    return y\n")
    assert not verdict.blocked


def test_check_reports_clean_file_as_empty() -> None:
    assert check("def f(x):\n    return x\n") == ()


def test_an_old_error_that_quotes_a_line_does_not_block_when_lines_move() -> None:
    before = "x = 1\ndef f():\n    print(x)\n    x = 2\n"
    assert [p.message for p in check(before) if p.blocking] == [
        "local variable 'x' defined in enclosing scope on line 1 referenced before assignment"]
    verdict = compare(before, "# a comment above\n" + before)      # line 1 becomes line 2
    assert not verdict.blocked and verdict.new_errors == [] and verdict.new_warnings == []
    assert verdict.old_count == 2                                   # the error and an unused variable


def test_a_second_error_of_that_kind_is_still_new() -> None:
    before = "x = 1\ndef f():\n    print(x)\n    x = 2\n"
    verdict = compare(before, before + "def g():\n    print(x)\n    x = 3\n")
    assert [str(p) for p in verdict.new_errors] == [
        "line 6: local variable 'x' defined in enclosing scope on line 1 referenced before assignment"]


def test_an_old_redefinition_warning_is_not_reported_again_when_lines_move() -> None:
    before = "import os\nimport os\nos.sep\n"
    assert compare(before, "\n\n" + before).new_warnings == []
    assert [str(p) for p in compare(before, before + "import sys\nimport sys\nsys.path\n").new_warnings] == [
        "line 5: redefinition of unused 'sys' from line 4"]


def test_a_check_leaves_no_cyclic_garbage() -> None:
    """pyflakes' checker is in reference cycles with its tree and scopes; the gate breaks them, so
    each edit's tree is freed at once (it was about 18 MB per edit of a 10,000-line file, left until
    a full collection)."""
    source = ("import os\nimport sys\n\n\nclass Shape:\n    sides = 0\n\n    def area(self, scale=2):\n"
              "        def inner(k):\n            return [k * s for s in range(self.sides)] + missing\n"
              "        return inner(scale)\n\n\nasync def main(argv):\n    async with sys.stdin as f:\n"
              "        return {a: b for a, b in argv if a}, lambda x: x + os.sep\n") * 20
    gc.collect()
    gc.disable()               # nothing collected behind the test's back
    try:
        problems = check.__wrapped__(source, "shape.py")       # type: ignore[attr-defined]
        assert any("undefined name 'missing'" in p.message for p in problems)
        assert gc.collect() == 0
    finally:
        gc.enable()

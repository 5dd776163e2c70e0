"""Unified diffs as pure text functions: parsing, offset tolerance, refusals."""

from __future__ import annotations

import pytest

from harness.errors import EditError
from harness.tools.editing import unified_diff

SOURCE = "".join(f"line {i}\n" for i in range(1, 31))
PATCH = """--- a/x.txt
+++ b/x.txt
@@ -3,3 +3,3 @@
 line 3
-line 4
+LINE FOUR
 line 5
@@ -20,3 +20,4 @@
 line 20
 line 21
+inserted
 line 22
"""


def test_hunks_apply_with_an_offset_when_the_file_grew_above() -> None:
    (fp,) = unified_diff.parse(PATCH)
    text, spans = unified_diff.apply("new a\nnew b\n" + SOURCE, fp.hunks, "x.txt")
    lines = text.split("\n")
    assert lines[5] == "LINE FOUR" and lines[23] == "inserted"
    assert spans == [(5, 7), (22, 25)]


def test_hunk_whose_context_changed_is_refused_with_expected_and_actual_lines() -> None:
    (fp,) = unified_diff.parse(PATCH)
    with pytest.raises(EditError) as info:
        unified_diff.apply(SOURCE.replace("line 21\n", "line twenty-one\n"), fp.hunks, "x.txt")
    message = str(info.value)
    assert "hunk 2 (@@ -20,3 +20,4 @@) of x.txt does not match the file anywhere" in message
    assert "expected near line 20:\n  line 20\n  line 21\n  line 22" in message
    assert "but the file has there:\n20  line 20\n21  line twenty-one\n22  line 22" in message
    assert "The most similar block is lines 20-22" in message


def test_miscounted_hunk_header_is_recounted_from_the_body() -> None:
    bad = "--- a/x.txt\n+++ b/x.txt\n@@ -3,7 +3,9 @@\n line 3\n-line 4\n+LINE FOUR\n line 5\n"
    (fp,) = unified_diff.parse(bad)
    text, _ = unified_diff.apply(SOURCE, fp.hunks, "x.txt")
    assert "line 3\nLINE FOUR\nline 5\n" in text


def test_blank_context_line_without_its_space_is_read_as_empty_line() -> None:
    patch = "--- a/f.py\n+++ b/f.py\n@@ -1,3 +1,3 @@\n a = 1\n\n-b = 2\n+b = 3\n"
    (fp,) = unified_diff.parse(patch)
    assert unified_diff.apply("a = 1\n\nb = 2\n", fp.hunks, "f.py")[0] == "a = 1\n\nb = 3\n"


def test_creation_and_deletion_sections_are_recognised() -> None:
    files = unified_diff.parse("--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n+a = 1\n+b = 2\n"
                           "--- a/old.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-x\n-y\n")
    assert [(f.source, f.target) for f in files] == [(None, "new.py"), ("old.txt", None)]
    assert unified_diff.apply("", files[0].hunks, "new.py")[0] == "a = 1\nb = 2\n"
    assert unified_diff.apply("x\ny\n", files[1].hunks, "old.txt")[0] == ""


def test_no_newline_marker_is_honoured() -> None:
    patch = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n"
    (fp,) = unified_diff.parse(patch)
    assert unified_diff.apply("a\nb\n", fp.hunks, "f")[0] == "a\nc"


def test_text_without_file_headers_is_refused_with_an_example() -> None:
    with pytest.raises(EditError) as info:
        unified_diff.parse("just some words\n")
    assert "the patch has no file headers" in str(info.value)
    assert "--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -17,3 +17,3 @@" in str(info.value)


def test_hunk_without_line_numbers_is_placed_by_its_unique_context() -> None:
    patch = "--- a/x.txt\n+++ b/x.txt\n@@\n line 11\n-line 12\n+LINE TWELVE\n line 13\n"
    (fp,) = unified_diff.parse(patch)
    text, spans = unified_diff.apply(SOURCE, fp.hunks, "x.txt")
    assert "line 11\nLINE TWELVE\nline 13\n" in text and spans == [(11, 13)]


def test_hunk_without_line_numbers_and_ambiguous_context_is_refused() -> None:
    patch = "--- a/f\n+++ b/f\n@@ def g @@\n x = 1\n-y = 2\n+y = 3\n"
    (fp,) = unified_diff.parse(patch)
    with pytest.raises(EditError) as info:
        unified_diff.apply("x = 1\ny = 2\nx = 1\ny = 2\n", fp.hunks, "f")
    assert ("has no line numbers (a bare @@) and its context and removed lines occur 2 times, at lines 1, 3"
            in str(info.value))

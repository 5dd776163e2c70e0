"""Anchor replacement as pure text functions: the refusal paths and their messages."""

from __future__ import annotations

import pytest

from harness.errors import EditError
from harness.tools.editing.anchors import replace_once

TAXES = "".join(f"def tax_{i}(amount):\n    if amount <= 0:\n        raise ValueError(amount)\n"
                f"    return amount * {i + 2} // 100\n\n" for i in range(24))


def test_unique_anchor_is_replaced_and_region_reported() -> None:
    rep = replace_once(TAXES, "def tax_10(amount):\n    if amount <= 0:\n",
                       "def tax_10(cents):\n    if cents <= 0:\n", "taxes.py")
    assert "def tax_10(cents):\n    if cents <= 0:\n" in rep.text
    assert rep.text.count("amount <= 0") == 23
    assert (rep.first_line, rep.last_line) == (51, 52)


def test_ambiguous_anchor_lists_line_numbers_and_changes_nothing() -> None:
    with pytest.raises(EditError) as info:
        replace_once(TAXES, "    if amount <= 0:\n", "    if amount < 0:\n", "taxes.py")
    message = str(info.value)
    assert "`old` occurs 24 times in taxes.py (starting at lines 2, 7, 12, 17, 22, 27, 32, 37, 42, 47, ...)" in message
    assert "nothing was changed" in message and "neighbouring line" in message


def test_missing_anchor_points_to_whitespace_near_miss() -> None:
    with pytest.raises(EditError) as info:
        replace_once(TAXES, "def tax_10(amount) :\n  if amount <= 0:", "x", "taxes.py")
    message = str(info.value)
    assert "`old` does not occur in taxes.py; nothing was changed." in message
    assert "The most similar block is lines 51-52" in message or "Lines 51-52 match it except for whitespace" in message


def test_missing_anchor_with_only_indentation_difference_says_whitespace() -> None:
    with pytest.raises(EditError) as info:
        replace_once(TAXES, "def tax_3(amount):\n  if amount <= 0:\n", "x", "taxes.py")
    message = str(info.value)
    assert "Lines 16-17 match it except for whitespace" in message
    assert "-  if amount <= 0:" in message and "+    if amount <= 0:" in message


def test_missing_anchor_points_to_most_similar_block_with_a_diff() -> None:
    with pytest.raises(EditError) as info:
        replace_once(TAXES, "    return amount * 13 // 1000\n", "x", "taxes.py")
    message = str(info.value)
    assert "The most similar block is line" in message
    assert "-    return amount * 13 // 1000" in message


def test_missing_anchor_with_nothing_similar_says_so() -> None:
    with pytest.raises(EditError) as info:
        replace_once(TAXES, "class Unrelated(Base):\n", "x", "taxes.py")
    assert "Nothing similar was found either" in str(info.value)


def test_crlf_file_accepts_lf_anchor() -> None:
    rep = replace_once("a = 1\r\nb = 2\r\n", "a = 1\nb = 2", "a = 1\nb = 3", "crlf.py")
    assert rep.text == "a = 1\r\nb = 3\r\n"


def test_anchor_copied_with_view_line_numbers_gets_told_to_drop_them() -> None:
    with pytest.raises(EditError) as info:
        replace_once(TAXES, "51  def tax_10(amount):\n52      if amount <= 0:", "x", "taxes.py")
    assert "Its lines start with line numbers, as `view` shows them" in str(info.value)

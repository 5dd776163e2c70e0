"""Word counting helpers."""

from __future__ import annotations

import re
from collections import Counter

_WORD = re.compile(r"[a-z]+")


def count_words(text: str) -> Counter[str]:
    """Count the words of `text`, case-insensitively."""
    return Counter(_WORD.findall(text.lower()))


def top_words(text: str, n: int) -> list[tuple[str, int]]:
    """The `n` most frequent words, most frequent first, ties broken alphabetically."""
    counts = count_words(text)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ranked[: n - 1]

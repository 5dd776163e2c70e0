"""Count words in text files."""

from wordcount.core import count_words, top_words

__all__ = ["count_words", "top_words"]

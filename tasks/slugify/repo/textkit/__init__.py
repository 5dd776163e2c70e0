"""Small text utilities for URLs and file names."""

from textkit.slug import slugify

__all__ = ["slugify"]

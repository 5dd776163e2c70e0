"""URL slugs: lowercase ASCII words joined by a separator."""

import re

_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def slugify(text: str, sep: str = "-", max_length: int = 80) -> str:
    """A URL-safe slug for `text`, at most `max_length` characters, never ending in `sep`."""
    slug = _NOT_ALNUM.sub(sep, text.lower()).strip(sep)
    return slug[:max_length].rstrip(sep)

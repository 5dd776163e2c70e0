"""Format seconds as a compact duration such as "1h30m"."""

from __future__ import annotations

_UNITS = (("h", 3600), ("m", 60), ("s", 1))


def format_duration(seconds: int) -> str:
    """The shortest "1h30m"-style text for `seconds`; "0s" for zero."""
    if seconds < 0:
        raise ValueError(f"seconds must not be negative, got {seconds}")
    parts = []
    for unit, size in _UNITS:
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"

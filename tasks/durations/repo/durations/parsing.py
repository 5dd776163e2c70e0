"""Parse compact durations such as "1h30m" or "45s" into seconds."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+)([hms])")
_SECONDS = {"h": 3600, "m": 60, "s": 1}


def parse_duration(text: str) -> int:
    """Seconds in `text`, a sequence of <number><unit> parts (units h, m, s), e.g. "1h30m"."""
    compact = text.replace(" ", "").lower()
    parts = _PART.findall(compact)
    if not compact or "".join(n + u for n, u in parts) != compact:
        raise ValueError(f"invalid duration {text!r}; expected parts like '1h30m' or '45s'")
    return sum(int(number) * _SECONDS[unit] for number, unit in parts)

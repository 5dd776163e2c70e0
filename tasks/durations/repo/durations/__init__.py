"""Human-friendly durations: "1h30m" <-> 5400 seconds."""

from durations.formatting import format_duration
from durations.parsing import parse_duration

__all__ = ["format_duration", "parse_duration"]

"""Renewal dates of yearly subscriptions. A subscription renews on the anniversary of its start."""

from __future__ import annotations

import datetime as dt


def next_renewal(start: dt.date, today: dt.date | None = None) -> dt.date:
    """The next anniversary of `start` on or after `today` (default: the current date)."""
    today = today or dt.date.today()
    candidate = start.replace(year=today.year)
    if candidate <= today:
        candidate = start.replace(year=today.year + 1)
    return candidate


def days_until_renewal(start: dt.date, today: dt.date | None = None) -> int:
    """Days from `today` (default: the current date) to the next renewal; 0 on the renewal day."""
    today = today or dt.date.today()
    return (next_renewal(start, today) - today).days

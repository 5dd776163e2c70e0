"""Pages over a sequence, numbered from 1."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Sequence, TypeVar

T = TypeVar("T")


class PageOutOfRange(LookupError):
    """The requested page number does not exist."""


@dataclass(frozen=True)
class Page(Generic[T]):
    number: int
    items: Sequence[T]
    total_pages: int

    @property
    def has_next(self) -> bool:
        return self.number < self.total_pages

    @property
    def has_previous(self) -> bool:
        return self.number > 1


def page_count(total: int, per_page: int) -> int:
    """How many pages `total` items fill; an empty list still has one (empty) page."""
    if per_page <= 0:
        raise ValueError(f"per_page must be positive, got {per_page}")
    return total // per_page + 1


def paginate(items: Sequence[T], number: int, per_page: int = 10) -> Page[T]:
    """Page `number` (1-based) of `items`."""
    pages = page_count(len(items), per_page)
    if not 1 <= number <= pages:
        raise PageOutOfRange(f"page {number} does not exist; pages are 1..{pages}")
    start = (number - 1) * per_page
    return Page(number=number, items=items[start:start + per_page], total_pages=pages)

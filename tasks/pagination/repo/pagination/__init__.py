"""Split long lists into numbered pages."""

from pagination.pager import Page, PageOutOfRange, page_count, paginate

__all__ = ["Page", "PageOutOfRange", "page_count", "paginate"]

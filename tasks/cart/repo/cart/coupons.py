"""Coupons: a percentage off, optionally limited to some product categories."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class Coupon:
    code: str
    percent: Decimal
    categories: frozenset[str] = frozenset()   # empty: applies to every category

    def applies_to(self, category: str) -> bool:
        return not self.categories or category in self.categories

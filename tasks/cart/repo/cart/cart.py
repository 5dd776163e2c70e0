"""Cart totals. Money is Decimal, rounded half-up to cents at the end."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from cart.coupons import Coupon

CENT = Decimal("0.01")


@dataclass(frozen=True)
class LineItem:
    sku: str
    unit_price: Decimal
    quantity: int = 1
    category: str = "general"

    @property
    def subtotal(self) -> Decimal:
        return self.unit_price * self.quantity


@dataclass
class Cart:
    items: list[LineItem] = field(default_factory=list)
    coupon: Coupon | None = None

    def add(self, item: LineItem) -> None:
        self.items.append(item)

    def subtotal(self) -> Decimal:
        return sum((item.subtotal for item in self.items), Decimal("0"))

    def discount(self) -> Decimal:
        if self.coupon is None:
            return Decimal("0")
        rate = self.coupon.percent / 100
        eligible = (item for item in self.items if self.coupon.applies_to(item.category))
        return sum((item.unit_price * rate for item in eligible), Decimal("0")).quantize(CENT, ROUND_HALF_UP)

    def total(self) -> Decimal:
        return (self.subtotal() - self.discount()).quantize(CENT, ROUND_HALF_UP)

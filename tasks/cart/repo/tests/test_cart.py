from decimal import Decimal

from cart import Cart, Coupon, LineItem


def test_subtotal_counts_quantities():
    cart = Cart([LineItem("mug", Decimal("12.00"), quantity=3), LineItem("pen", Decimal("1.50"))])
    assert cart.subtotal() == Decimal("37.50")


def test_total_without_coupon():
    cart = Cart([LineItem("mug", Decimal("12.00"), quantity=2)])
    assert cart.total() == Decimal("24.00")


def test_coupon_on_single_items():
    cart = Cart([LineItem("mug", Decimal("12.00"))], coupon=Coupon("TEN", Decimal("10")))
    assert cart.total() == Decimal("10.80")

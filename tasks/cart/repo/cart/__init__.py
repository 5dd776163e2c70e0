"""A shopping cart with coupons."""

from cart.cart import Cart, LineItem
from cart.coupons import Coupon

__all__ = ["Cart", "Coupon", "LineItem"]

"""Yearly subscriptions: when does each one renew?"""

from subscriptions.renewal import days_until_renewal, next_renewal

__all__ = ["days_until_renewal", "next_renewal"]

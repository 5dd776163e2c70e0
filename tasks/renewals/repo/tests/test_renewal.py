import datetime as dt

from subscriptions import days_until_renewal, next_renewal


def test_renewal_later_this_year():
    assert next_renewal(dt.date(2020, 6, 15), today=dt.date(2025, 3, 1)) == dt.date(2025, 6, 15)


def test_renewal_next_year_when_anniversary_passed():
    assert next_renewal(dt.date(2020, 1, 10), today=dt.date(2025, 3, 1)) == dt.date(2026, 1, 10)


def test_days_until_renewal():
    assert days_until_renewal(dt.date(2020, 3, 11), today=dt.date(2025, 3, 1)) == 10

import pytest

from durations import format_duration, parse_duration


def test_parse_hours_and_minutes():
    assert parse_duration("1h30m") == 5400


def test_parse_rejects_garbage():
    with pytest.raises(ValueError):
        parse_duration("1x")


def test_format_hours_and_minutes():
    assert format_duration(5400) == "1h30m"


def test_format_zero():
    assert format_duration(0) == "0s"

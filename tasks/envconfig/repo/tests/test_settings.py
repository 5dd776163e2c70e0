import pytest

from envconfig import ConfigError, get_bool, get_int, get_str


def test_get_int_parses_digits():
    assert get_int({"PORT": "8080"}, "PORT") == 8080


def test_get_int_uses_default_when_unset():
    assert get_int({}, "PORT", default=80) == 80


def test_missing_setting_raises_config_error():
    with pytest.raises(ConfigError, match="PORT"):
        get_int({}, "PORT")


def test_get_bool_accepts_common_spellings():
    assert get_bool({"DEBUG": "Yes"}, "DEBUG") is True
    assert get_bool({"DEBUG": "off"}, "DEBUG") is False


def test_get_str_returns_value():
    assert get_str({"NAME": "api"}, "NAME") == "api"

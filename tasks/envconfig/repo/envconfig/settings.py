"""Readers for environment settings."""

from __future__ import annotations

from typing import Mapping

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_MISSING = object()


class ConfigError(Exception):
    """A setting is missing or has a value of the wrong kind."""


def _raw(env: Mapping[str, str], name: str, default: object) -> object:
    value = env.get(name)
    if value is None or value == "":
        if default is _MISSING:
            raise ConfigError(f"{name} is not set")
        return default
    return value


def get_str(env: Mapping[str, str], name: str, default: object = _MISSING) -> str:
    return str(_raw(env, name, default))


def get_int(env: Mapping[str, str], name: str, default: object = _MISSING) -> int:
    value = _raw(env, name, default)
    return int(value)


def get_bool(env: Mapping[str, str], name: str, default: object = _MISSING) -> bool:
    value = _raw(env, name, default)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"not a boolean: {value!r}")

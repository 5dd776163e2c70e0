"""Typed settings from environment variables.

Every problem with a setting (missing, or a value of the wrong kind) raises `ConfigError`, whose
message names the variable.
"""

from envconfig.settings import ConfigError, get_bool, get_int, get_str

__all__ = ["ConfigError", "get_bool", "get_int", "get_str"]

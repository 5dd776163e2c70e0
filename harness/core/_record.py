"""The reading and writing rule every record file shares (`harness.core.records` holds the records).

A record is a frozen dataclass deriving from `Record`; its file is the JSON object `to_dict` returns:
the fields in order, then the keys it did not know when it was read (`unknown`), then
``"schema_version": SCHEMA_VERSION``. `from_dict` is tolerant in what it accepts and strict in what it
believes:

- a missing key takes the field's default (a file written before the key existed still reads);
- a key the record does not know is kept in `unknown` and written back (a newer file loses nothing);
- ``schema_version`` is not a field: absent in files written before versions, any number is read;
- a value of the wrong type raises `RecordError` naming the file, the key, the value and the type
  expected, unless `strict=False`, for a viewer that shows every value as text: then it is kept as
  read (a nested record that is not an object reads as the empty one), and the field's type is not
  to be relied on.

Field types understood: str, int, float (an int is accepted), bool, None, `X | None`, `Literal[...]`,
`list[X]`, `dict[str, X]`, `Any`, and a nested `Record`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, ClassVar, Self

from harness.errors import HarnessError

SCHEMA_KEY = "schema_version"


class RecordError(HarnessError):
    """A record file holds a value of the wrong type: `source` (the file), `key`, `value`, `expected`."""

    def __init__(self, source: str, key: str, value: object, expected: str) -> None:
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        super().__init__(f"{source}: key {key!r} holds {shown} ({type(value).__name__}); expected {expected}")
        self.source, self.key, self.value, self.expected = source, key, value, expected


class Record:
    """Base of the frozen record dataclasses: `to_dict` and the tolerant `from_dict`."""

    SCHEMA_VERSION: ClassVar[int]
    unknown: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: _encode(getattr(self, f.name)) for f in dataclasses.fields(self)  # type: ignore[arg-type]
                if f.name != "unknown"}
        return {**data, **self.unknown, SCHEMA_KEY: self.SCHEMA_VERSION}

    @classmethod
    def from_dict(cls, data: object, source: str, *, strict: bool = True) -> Self:
        """The record `data` (a file's parsed JSON) holds; `source` names the file in errors.

        Raises:
            RecordError: `data` is not an object, or (`strict`) a key holds a value of the wrong type.
        """
        if not isinstance(data, dict):
            raise RecordError(source, "(the whole file)", data, "a JSON object")
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls) if f.name != "unknown"}  # type: ignore[arg-type]
        values: dict[str, Any] = {}
        for name in names:
            if name in data:
                values[name] = _decode(data[name], hints[name], source, name, strict)
        values["unknown"] = {k: v for k, v in data.items() if k not in names and k != SCHEMA_KEY}
        return cls(**values)


def _encode(value: Any) -> Any:
    return value.to_dict() if isinstance(value, Record) else value


def _decode(value: Any, hint: Any, source: str, key: str, strict: bool) -> Any:
    if isinstance(hint, type) and issubclass(hint, Record):
        if not strict and not isinstance(value, dict):
            value = {}          # a viewer: a nested record that is not an object shows as not recorded
        return hint.from_dict(value, f"{source}: {key}", strict=strict)
    if strict and not _matches(value, hint):
        raise RecordError(source, key, value, _describe(hint))
    return value


def _matches(value: Any, hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    if origin in (types.UnionType, typing.Union):
        return any(_matches(value, a) for a in args)
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if origin is list:
        return isinstance(value, list) and all(_matches(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(isinstance(k, str) and _matches(v, args[1]) for k, v in value.items())
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(hint, type) and isinstance(value, hint)


def _describe(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is None or hint is type(None):
        return "null"
    if origin in (types.UnionType, typing.Union):
        return " or ".join(_describe(a) for a in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is list:
        return f"a list of {_describe(args[0])}"
    if origin is dict:
        return f"an object of {_describe(args[1])}"
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))

"""JSON Schema validation bounded in time: the one validator of tool arguments.

Schemas come from us, from plugins and from MCP servers; arguments come from the model. Python's `re`
backtracks, so one `"pattern": "^(a+)+$"` checked against `"a" * 35 + "b"` takes hours (and jsonschema
evaluates `pattern` and `patternProperties` with `re.search`). Here both keywords run on RE2 (the
`google-re2` package), whose matching time is linear in the input, with a bounded memory budget per
pattern. A pattern RE2 cannot run (lookaround, backreferences) or that is too large is a problem of the
schema, reported when the tool is registered (`schema_problems`), never met at call time. Schemas are
also bounded in size and depth, so no definition can make one validation slow by its own size.

    schema_problems(schema)      what makes a schema unusable here: size, depth, patterns RE2 refuses
    validator(schema)            a Draft 2020-12 validator whose `pattern` keywords run on RE2
    regular_expressions(schema)  every pattern a schema holds
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import re2
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError

MAX_SCHEMA_BYTES = 256 * 1024
"""The largest schema (as compact JSON) a tool may have."""
MAX_SCHEMA_DEPTH = 32
"""The deepest nesting of objects and arrays in a schema."""
MAX_PATTERN_CHARS = 2000
PATTERN_MEMORY = 2 << 20
"""RE2's memory budget for one compiled pattern (its automata); a pattern needing more is refused."""
PATTERNS_KEPT = 256
"""Compiled patterns kept (so at most PATTERNS_KEPT x PATTERN_MEMORY of automata)."""


class PatternRefused(ValueError):
    """RE2 cannot run this pattern (its syntax, or its size)."""

    def __init__(self, pattern: str, why: str) -> None:
        super().__init__(f"pattern {json.dumps(pattern)[:200]} cannot be evaluated in bounded time: {why}")
        self.pattern, self.why = pattern, why


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False      # RE2 would write its parse errors to stderr (the MCP wire's neighbour)
    options.max_mem = PATTERN_MEMORY
    return options


@functools.lru_cache(maxsize=PATTERNS_KEPT)
def compiled(pattern: str) -> Any:
    """`pattern` compiled by RE2, or PatternRefused saying why not."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternRefused(pattern, f"it is {len(pattern)} characters long, over {MAX_PATTERN_CHARS}")
    try:
        return re2.compile(pattern, options=_options())
    except re2.error as exc:
        why = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternRefused(pattern, f"RE2 refuses it ({why}); RE2 runs in linear time and so has no "
                                      "lookaround or backreferences and bounds repetition counts, e.g. use "
                                      "\"^[a-z]+$\" instead of \"^(?=[a-z])\\\\w+$\"") from exc


def _pattern(_validator: Any, pattern: str, instance: Any, _schema: Any) -> Iterator[ValidationError]:
    if isinstance(instance, str) and compiled(pattern).search(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any,
                        _schema: Any) -> Iterator[ValidationError]:
    if not isinstance(instance, dict):
        return
    for pattern, subschema in patterns.items():
        regex = compiled(pattern)
        for name, value in instance.items():
            if regex.search(name) is not None:
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any,
                           schema: dict[str, Any]) -> Iterator[ValidationError]:
    """jsonschema's own, with the names matched by `patternProperties` found through RE2."""
    if not isinstance(instance, dict):
        return
    properties = schema.get("properties", {})
    patterns = [compiled(p) for p in schema.get("patternProperties", {})]
    extras = [name for name in instance
              if name not in properties and not any(r.search(name) is not None for r in patterns)]
    if isinstance(additional, dict):
        for name in extras:
            yield from validator.descend(instance[name], additional, path=name)
    elif not additional and extras:
        listed = ", ".join(repr(name) for name in sorted(extras))
        yield ValidationError(f"Additional properties are not allowed ({listed} "
                              f"{'was' if len(extras) == 1 else 'were'} unexpected)")


BoundedValidator = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    {"pattern": _pattern, "patternProperties": _pattern_properties, "additionalProperties": _additional_properties})


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    """A validator of `schema` whose regular expressions run in linear time (check `schema_problems` first)."""
    made: Draft202012Validator = BoundedValidator(schema)
    return made


def _depth(value: Any, limit: int) -> int:
    """How deep `value` nests (stops counting past `limit`), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def regular_expressions(value: Any) -> Iterator[str]:
    """Every regular expression a schema holds: `pattern` values and `patternProperties` names."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("pattern"), str):
                yield item["pattern"]
            if isinstance(item.get("patternProperties"), dict):
                yield from (str(k) for k in item["patternProperties"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def schema_problems(schema: Any) -> list[str]:
    """What keeps `schema` from being validated in bounded time, each said with the value; [] when usable."""
    try:
        size = len(json.dumps(schema, separators=(",", ":")))
    except (TypeError, ValueError, RecursionError) as exc:
        return [f"it is not JSON ({exc})"]
    if size > MAX_SCHEMA_BYTES:
        return [f"it is {size} bytes as JSON, over the {MAX_SCHEMA_BYTES} a tool's schema may have"]
    depth = _depth(schema, MAX_SCHEMA_DEPTH)
    if depth > MAX_SCHEMA_DEPTH:
        return [f"it nests deeper than {MAX_SCHEMA_DEPTH} levels of objects and arrays"]
    problems = []
    patterns = sorted(set(regular_expressions(schema)))
    if patterns and '"unevaluatedProperties"' in json.dumps(schema):
        problems.append("it uses unevaluatedProperties with patterns, which jsonschema matches with Python's "
                        "backtracking `re`; use additionalProperties instead")
    for pattern in patterns:
        try:
            compiled(pattern)
        except PatternRefused as exc:
            problems.append(str(exc))
    return problems

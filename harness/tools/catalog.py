"""The tool catalog: registration (schemas checked once), validation of every call, execution.

Validation is bounded in time (`harness.tools.schema`: regular expressions on RE2, schemas bounded in
size and depth); a schema that cannot be validated so is refused when the tool is registered.

`Catalog.execute` never raises `ToolError`: a bad call (unknown tool, arguments that do not match
the schema) and a tool's own refusal become a `ToolResult` with `is_error=True` whose text names
what was wrong, the value, what was expected and a correct example, and whose `error_kind`
(`harness.tools.base.error_kind`) says which kind of error it was. Errors of the harness itself
(`HarnessError`, `SandboxError`) propagate and stop the run.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError

from harness.config import Config
from harness.errors import HarnessError, ToolArgumentsError, ToolError, UnknownToolError
from harness.messages import ToolResult, ToolUse
from harness.tools.base import Effect, Observation, Tool, ToolContext, error_kind
from harness.tools.editing.apply_patch import apply_patch_tool
from harness.tools.editing.edit import edit_tool
from harness.tools.editing.view import view_tool
from harness.tools.editing.write import write_tool
from harness.tools.retrieval.find_code import find_code_tool
from harness.tools.retrieval.search import search_tool
from harness.tools.schema import schema_problems, validator
from harness.tools.shell.bash import bash_tool

EMPTY_OUTPUT = "(the tool succeeded and printed nothing)"


class Catalog:
    def __init__(self, tools: Sequence[Tool] = ()) -> None:
        self.tools: dict[str, Tool] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        """Register `tool`; a malformed definition is our bug and raises HarnessError."""
        problems = definition_problems(tool)
        if tool.name in self.tools:
            problems.append("a tool with this name is already registered")
        if problems:
            raise HarnessError(f"tool {tool.name!r} cannot be registered: " + "; ".join(problems))
        self.tools[tool.name] = tool
        self._validators[tool.name] = validator(tool.parameters)

    def specs(self) -> list[dict[str, Any]]:
        return [tool.spec() for tool in self.tools.values()]

    def effect_of(self, name: str) -> Effect:
        if name not in self.tools:
            raise UnknownToolError(unknown_tool_message(name, list(self.tools)))
        return self.tools[name].effect

    def execute(self, call: ToolUse, ctx: ToolContext) -> ToolResult:
        try:
            out = self._run(call, dataclasses.replace(ctx, tool_use_id=call.id))
        except ToolError as exc:
            return ToolResult(call.id, str(exc), is_error=True, error_kind=error_kind(exc))
        except (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError) as exc:
            return ToolResult(call.id, f"{call.name} could not access {exc.filename or 'a file'}: "
                                       f"{exc.strerror or exc} (tools act as the sandbox's unprivileged user); "
                                       "check the path with bash, e.g. `ls -l <path>`",
                              is_error=True, error_kind=error_kind(exc))
        if isinstance(out, Observation):
            return ToolResult(call.id, out.text or EMPTY_OUTPUT, details=out.details)
        return ToolResult(call.id, out or EMPTY_OUTPUT)

    def _run(self, call: ToolUse, ctx: ToolContext) -> str | Observation:
        tool = self.tools.get(call.name)
        if tool is None:
            raise UnknownToolError(unknown_tool_message(call.name, list(self.tools)))
        order = {name: n for n, name in enumerate(tool.parameters.get("properties", {}))}
        errors = sorted(self._validators[tool.name].iter_errors(call.input),
                        key=lambda e: (0 if e.validator == "required" else 1 if not e.path else 2,
                                       order.get(str(e.path[0]) if e.path else "", 0), str(e.message)))
        if errors:
            raise ToolArgumentsError(arguments_message(tool, call.input, errors))
        return tool.function(ctx, **call.input)


def definition_problems(tool: Tool) -> list[str]:
    schema = tool.parameters
    problems = [f"its parameters cannot be validated in bounded time: {p}" for p in schema_problems(schema)]
    if problems:       # too large or deep to check further, or patterns no bounded engine runs
        return problems
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return [f"its parameters are not a valid JSON Schema ({exc.message})"]
    if schema.get("type") != "object":
        problems.append('parameters must have "type": "object"')
    if schema.get("additionalProperties") is not False:
        problems.append('parameters must set "additionalProperties": false')
    if "required" not in schema:
        problems.append('parameters must list "required" (an empty list if every argument is optional)')
    if not tool.description.strip():
        problems.append("the description is empty")
    if tool.example is not None and list(validator(schema).iter_errors(tool.example)):
        problems.append(f"its example {tool.example!r} does not match its own schema")
    return problems


def unknown_tool_message(name: str, names: list[str]) -> str:
    return (f"there is no tool named {name!r}; the tools are: {', '.join(names)}. "
            f"Call one of them by its exact name, e.g. {names[0] if names else 'view'}")


def arguments_message(tool: Tool, given: dict[str, Any], errors: list[ValidationError]) -> str:
    lines = [f"the call to {tool.name} was not run: its arguments do not match the tool's schema:"]
    props = tool.parameters.get("properties", {})
    for err in errors:
        lines.append("- " + _describe(err, props))
    lines.append(f"The arguments {tool.name} takes: {_signature(tool)}.")
    if tool.example is not None:
        lines.append(f"A correct call: {tool.name}({json.dumps(tool.example, ensure_ascii=False)})")
    return "\n".join(lines)


def _describe(err: ValidationError, props: dict[str, Any]) -> str:
    arg = ".".join(str(p) for p in err.path)
    instance: Any = err.instance         # jsonschema types these as possibly unset; a validation error has both
    if err.validator == "required":
        missing = next((m for m in cast(list[str], err.validator_value) if m not in instance), "?")
        return f"`{missing}` is missing; it is required: {props.get(missing, {}).get('description', '')}".rstrip(": ")
    if err.validator == "additionalProperties":
        extra = sorted(set(instance) - set(props))
        return f"{', '.join(f'`{e}`' for e in extra)}: not an argument of this tool (it takes {', '.join(props)})"
    value = json.dumps(err.instance, ensure_ascii=False)
    value = value if len(value) <= 80 else value[:77] + "..."
    expected = {"type": f"a value of type {err.validator_value}",
                "minLength": f"a string of at least {err.validator_value} character(s)",
                "maxLength": f"a string of at most {err.validator_value} characters",
                "minimum": f"a number >= {err.validator_value}", "maximum": f"a number <= {err.validator_value}",
                "enum": f"one of {err.validator_value}"}.get(str(err.validator), err.message)
    return f"`{arg or '(arguments)'}`: got {value}; expected {expected}"


def _signature(tool: Tool) -> str:
    required = set(tool.parameters.get("required", []))
    parts = []
    for name, prop in tool.parameters.get("properties", {}).items():
        kind = prop.get("type", "any")
        parts.append(f"{name}: {kind}" + ("" if name in required else " (optional)"))
    return ", ".join(parts)


def default_catalog(config: Config, extra: Sequence[Tool] = ()) -> Catalog:
    """The catalog every session gets: shell, viewer, search, find_code and the three edit tools."""
    cfg = config.tools
    return Catalog([bash_tool(cfg), view_tool(cfg), search_tool(cfg), find_code_tool(cfg), edit_tool(cfg),
                    apply_patch_tool(cfg), write_tool(cfg), *extra])

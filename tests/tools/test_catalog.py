"""The catalog: definitions checked at registration, every call validated before it runs."""

from __future__ import annotations

from typing import Any

import pytest

from harness.config import Config
from harness.errors import (
    ApprovalDenied,
    ApprovalError,
    ChannelLost,
    EditError,
    HarnessError,
    PathError,
    ToolArgumentsError,
    ToolError,
    UnknownToolError,
)
from harness.messages import ToolUse
from harness.tools.base import Effect, Tool, ToolContext
from harness.tools.catalog import Catalog, default_catalog
from harness.tools.outbound.registry import outbound_tools

RAN: list[dict[str, Any]] = []

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string", "minLength": 1, "description": "A file."},
                   "line": {"type": "integer", "minimum": 1, "description": "A line."}},
    "required": ["path"], "additionalProperties": False}


def _record(ctx: ToolContext, **args: Any) -> str:
    RAN.append(args)
    if args.get("path") == "refuse":
        raise ToolError("refused: the path 'refuse' is not allowed; e.g. path='a.py'")
    return ""


TOOL = Tool("look", "Look at a file.", SCHEMA, Effect.READ, _record, example={"path": "a.py", "line": 3})
CTX = ToolContext(sandbox=None, session="s")  # type: ignore[arg-type]  # these tools never touch it


def test_bad_call_never_runs_and_lists_every_violation_with_an_example() -> None:
    RAN.clear()
    result = Catalog([TOOL]).execute(ToolUse("u1", "look", {"line": "ten", "colour": "red"}), CTX)
    assert result.is_error and RAN == []
    assert result.content == (
        "the call to look was not run: its arguments do not match the tool's schema:\n"
        "- `path` is missing; it is required: A file.\n"
        "- `colour`: not an argument of this tool (it takes path, line)\n"
        "- `line`: got \"ten\"; expected a value of type integer\n"
        "The arguments look takes: path: string, line: integer (optional).\n"
        'A correct call: look({"path": "a.py", "line": 3})')


def test_valid_call_runs_and_empty_output_is_said_explicitly() -> None:
    RAN.clear()
    result = Catalog([TOOL]).execute(ToolUse("u2", "look", {"path": "a.py"}), CTX)
    assert not result.is_error and RAN == [{"path": "a.py"}]
    assert result.content == "(the tool succeeded and printed nothing)"


def test_tool_error_becomes_an_error_observation() -> None:
    result = Catalog([TOOL]).execute(ToolUse("u3", "look", {"path": "refuse"}), CTX)
    assert result.is_error and result.tool_use_id == "u3"
    assert result.content == "refused: the path 'refuse' is not allowed; e.g. path='a.py'"


def test_unknown_tool_lists_the_tools_that_exist() -> None:
    catalog = Catalog([TOOL])
    result = catalog.execute(ToolUse("u4", "read_file", {}), CTX)
    assert result.is_error
    assert result.content.startswith("there is no tool named 'read_file'; the tools are: look.")
    with pytest.raises(UnknownToolError):
        catalog.effect_of("read_file")
    assert catalog.effect_of("look") is Effect.READ


@pytest.mark.parametrize("schema, problem", [
    ({"type": "object", "properties": {}, "required": []}, '"additionalProperties": false'),
    ({"type": "object", "properties": {}, "additionalProperties": False}, 'must list "required"'),
    ({"type": "array", "required": [], "additionalProperties": False}, '"type": "object"'),
    ({"type": "object", "properties": {"a": {"type": "strin"}}, "required": [], "additionalProperties": False},
     "not a valid JSON Schema"),
])
def test_malformed_definitions_are_refused_at_registration(schema: dict[str, Any], problem: str) -> None:
    with pytest.raises(HarnessError, match="tool 'bad' cannot be registered") as info:
        Catalog([Tool("bad", "Bad.", schema, Effect.READ, _record)])
    assert problem in str(info.value)


def test_well_formed_definition_is_accepted() -> None:
    assert list(Catalog([TOOL]).tools) == ["look"]


def test_duplicate_names_and_wrong_examples_are_refused() -> None:
    with pytest.raises(HarnessError, match="already registered"):
        Catalog([TOOL, TOOL])
    with pytest.raises(HarnessError, match="does not match its own schema"):
        Catalog([Tool("x", "X.", SCHEMA, Effect.READ, _record, example={"line": 0})])


def test_default_catalog_is_small_distinct_and_well_formed() -> None:
    catalog = default_catalog(Config())
    assert list(catalog.tools) == ["bash", "view", "search", "find_code", "edit", "apply_patch", "write"]
    effects = {name: catalog.effect_of(name).value for name in catalog.tools}
    assert effects == {"bash": "sandbox", "view": "read", "search": "read", "find_code": "read",
                       "edit": "sandbox", "apply_patch": "sandbox", "write": "sandbox"}
    for spec in catalog.specs():
        assert spec["input_schema"]["additionalProperties"] is False and "required" in spec["input_schema"]
        assert len(spec["description"]) < 800
    extra = Tool("http_request", "Fetch a URL (held for approval).", SCHEMA, Effect.OUTBOUND, _record)
    assert default_catalog(Config(), [extra]).effect_of("http_request") is Effect.OUTBOUND


def _raise(exc: Exception) -> Tool:
    def run(ctx: ToolContext, **args: Any) -> str:
        raise exc
    return Tool("act", "Act on a file.", SCHEMA, Effect.SANDBOX, run, example={"path": "a.py"})


@pytest.mark.parametrize("exc, kind", [
    (ToolArgumentsError("bad"), "validation"), (PathError("outside"), "path"), (EditError("stale"), "edit"),
    (ApprovalDenied("denied"), "approval"), (ChannelLost("died"), "sandbox"), (ToolError("failed"), "tool"),
    (FileNotFoundError(2, "No such file or directory", "/workspace/a.py"), "path"),
    (IsADirectoryError(21, "Is a directory", "/workspace/pkg"), "path"),
    (PermissionError(13, "Permission denied", "/workspace/a.py"), "permission")])
def test_each_tool_error_reaches_the_model_with_its_kind(exc: Exception, kind: str) -> None:
    result = Catalog([_raise(exc)]).execute(ToolUse("u7", "act", {"path": "a.py"}), CTX)
    assert result.is_error and result.error_kind == kind


def test_a_bad_call_is_a_validation_error_an_unknown_name_its_own_kind_and_success_has_none() -> None:
    catalog = Catalog([TOOL])
    assert catalog.execute(ToolUse("u8", "look", {"line": 0}), CTX).error_kind == "validation"
    assert catalog.execute(ToolUse("u9", "lok", {"path": "a.py"}), CTX).error_kind == "unknown_tool"
    assert catalog.execute(ToolUse("u10", "look", {"path": "a.py"}), CTX).error_kind is None


def test_each_call_gets_its_id_on_a_copy_that_shares_the_sessions_state_and_approver() -> None:
    seen: list[ToolContext] = []

    def keep(ctx: ToolContext, **args: Any) -> str:
        seen.append(ctx)
        return "kept"

    ctx = ToolContext(sandbox=None, session="s")  # type: ignore[arg-type]  # this tool never touches it
    catalog = Catalog([Tool("keep", "Keep the context.", SCHEMA, Effect.READ, keep)])
    catalog.execute(ToolUse("u11", "keep", {"path": "a"}), ctx)
    catalog.execute(ToolUse("u12", "keep", {"path": "b"}), ctx)
    assert [c.tool_use_id for c in seen] == ["u11", "u12"] and ctx.tool_use_id == ""
    assert all(c.edit_state is ctx.edit_state and c.code_index is ctx.code_index for c in seen)


def test_an_outbound_tool_in_a_session_without_an_approver_stops_the_run() -> None:
    tool = {t.name: t for t in outbound_tools(Config())}["http_request"]
    with pytest.raises(ApprovalError, match="without an approver"):
        Catalog([tool]).execute(ToolUse("u13", "http_request", {"method": "GET", "url": "https://example.org/"}), CTX)

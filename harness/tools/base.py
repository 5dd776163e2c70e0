"""What a tool is: data plus a function.

A `Tool` has a name, a description written for a newly arrived colleague, a JSON Schema for its
arguments (with `required` and `additionalProperties: false`), an effect class the approval policy
reads, and the function that runs it. The function receives a `ToolContext` (what a call can
reach: the sandbox, this session's edit state and code index, the approver of outbound calls) and
the validated arguments, returns the observation text, and raises `harness.errors.ToolError` for
anything the model should read as an error observation; `error_kind` says which kind each one is.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from harness.errors import (
    ApprovalDenied,
    ChannelLost,
    EditError,
    PathError,
    ToolArgumentsError,
    ToolError,
    UnknownToolError,
)
from harness.messages import ToolErrorKind
from harness.tools.editing.edit_state import EditState
from harness.tools.retrieval.chunk_cache import shared_cache
from harness.tools.retrieval.code_index import CodeIndex

if TYPE_CHECKING:
    from sandbox.api import Sandbox


class Effect(enum.StrEnum):
    READ = "read"            # looks, changes nothing
    SANDBOX = "sandbox"      # changes things inside the sandbox only
    OUTBOUND = "outbound"    # leaves the sandbox: held for approval, run once by the host


class Approver(Protocol):
    """Holds an outbound call until it is approved, then runs it once (`harness.approval.gate.ApprovalGate`).

    `action` is a `harness.tools.outbound.action.OutboundAction` (typed loosely here: that module
    builds on this one).
    """

    def run(self, action: Any, arguments: dict[str, Any], ctx: ToolContext) -> str: ...


@dataclass
class ToolContext:
    """What a tool call can reach. One per session; `tool_use_id` is set per call (on a copy that
    shares the session's edit state, code index and approver)."""

    sandbox: Sandbox
    session: str
    tool_use_id: str = ""
    approver: Approver | None = None         # outbound tools hand their calls to it; None: none allowed
    # whose outbound idempotency keys these calls' are: "" (the session), or a run's, kept by its resumes
    key_scope: str = ""
    edit_state: EditState = field(default_factory=EditState)   # fingerprints and applied keys (editing/)
    code_index: CodeIndex = field(default_factory=lambda: CodeIndex(cache=shared_cache()))   # find_code's index


@dataclass(frozen=True)
class Observation:
    """What a tool function may return instead of plain text: the text the model reads and the same
    outcome as data (`details`: JSON values), which MCP clients receive as structured content."""

    text: str
    details: dict[str, Any]


ToolFunction = Callable[..., "str | Observation"]

ERROR_KINDS: dict[type[Exception], ToolErrorKind] = {
    ToolArgumentsError: "validation",
    UnknownToolError: "unknown_tool",
    PathError: "path",
    EditError: "edit",
    ApprovalDenied: "approval",
    ChannelLost: "sandbox",
    FileNotFoundError: "path",
    IsADirectoryError: "path",
    NotADirectoryError: "path",
    PermissionError: "permission",
}
"""The one mapping from an error a tool call raised to the kind its result carries."""


def error_kind(exc: ToolError | OSError) -> ToolErrorKind:
    """The kind of `exc`: that of its nearest class in ERROR_KINDS, else "tool" (any other ToolError)."""
    for cls in type(exc).__mro__:
        if cls in ERROR_KINDS:
            return ERROR_KINDS[cls]
    return "tool"


def key_schema(description: str) -> dict[str, Any]:
    """The `key` parameter of every tool with an effect: an idempotency key of 1 to 200 characters."""
    return {"type": "string", "minLength": 1, "maxLength": 200, "description": description}


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    effect: Effect
    function: ToolFunction
    example: dict[str, Any] | None = None   # a correct call, quoted in argument-error messages
    output_schema: dict[str, Any] | None = None   # JSON Schema of the `details` its Observation carries

    def spec(self) -> dict[str, Any]:
        """The definition sent to the model (provider adapters map it to their own shape)."""
        return {"name": self.name, "description": self.description, "input_schema": self.parameters}

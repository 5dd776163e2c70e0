"""Messages exchanged between the loop and a model: typed, immutable and serialisable.

A trajectory is a list of `Message`. On disk (trajectory.jsonl) each message is one JSON line:
``{"role": "system"|"user"|"assistant", "content": [block, ...]}`` with blocks
``{"type": "text", "text"}``, ``{"type": "tool_use", "id", "name", "input"}`` and
``{"type": "tool_result", "tool_use_id", "content", "is_error"}`` (plus ``"error_kind"`` on an error
result; a trajectory written without it reads as ``error_kind=None``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

Role = Literal["system", "user", "assistant"]

ToolErrorKind = Literal["parsing", "unknown_tool", "validation", "path", "permission", "edit", "approval",
                        "sandbox", "sandbox_unavailable", "harness", "tool"]
"""What kind of error a tool result reports (as inspect_ai's ToolCallError does):

    parsing         the model's call could not be read (malformed JSON arguments)
    unknown_tool    no tool has that name
    validation      the arguments do not match the tool's schema or its own checks
    path            a path outside the workspace, missing, or not of the expected type
    permission      the sandbox's unprivileged user may not read or write it
    edit            anchor missing or ambiguous, hunk mismatch, file changed since viewed, lint refusal
    approval        a human or a policy refused an outbound action
    sandbox         the sandbox failed during the call (its channel died)
    sandbox_unavailable  the sandbox's container stopped or vanished (OOM, killed from outside): the
                    session ends (stop reason "sandbox_unavailable"), an infrastructure failure
    harness         the harness failed, or stopped before running the call
    tool            any other refusal or failure the tool reports (a search that cannot run, a failed push)

Tool errors are mapped to kinds in one place, `harness.tools.base.error_kind`.
"""

TOOL_ERROR_KINDS: tuple[ToolErrorKind, ...] = get_args(ToolErrorKind)


@dataclass(frozen=True)
class TextBlock:
    text: str
    type: Literal["text"] = "text"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass(frozen=True)
class ToolUse:
    id: str
    name: str
    input: dict[str, Any]
    type: Literal["tool_use"] = "tool_use"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "tool_use", "id": self.id, "name": self.name, "input": self.input}


@dataclass(frozen=True)
class ToolResult:
    tool_use_id: str
    content: str
    is_error: bool = False
    error_kind: ToolErrorKind | None = None   # set on every error the harness produces; None on success
    type: Literal["tool_result"] = "tool_result"
    details: dict[str, Any] | None = field(default=None, compare=False)   # the outcome as data (MCP), not sent

    def __post_init__(self) -> None:
        if self.error_kind is not None and not self.is_error:
            raise ValueError(f"a tool result with error_kind={self.error_kind!r} must have is_error=True")

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": "tool_result", "tool_use_id": self.tool_use_id,
                                "content": self.content, "is_error": self.is_error}
        if self.error_kind is not None:
            data["error_kind"] = self.error_kind
        return data


Block = TextBlock | ToolUse | ToolResult


@dataclass(frozen=True)
class Message:
    role: Role
    content: tuple[Block, ...] = field(default_factory=tuple)

    @property
    def tool_uses(self) -> list[ToolUse]:
        return [b for b in self.content if isinstance(b, ToolUse)]

    @property
    def tool_results(self) -> list[ToolResult]:
        return [b for b in self.content if isinstance(b, ToolResult)]

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": [b.to_dict() for b in self.content]}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Message:
        role = data.get("role")
        if role not in ("system", "user", "assistant"):
            raise ValueError(f"message role must be 'system', 'user' or 'assistant', got {role!r}; "
                             'example: {"role": "user", "content": [{"type": "text", "text": "hi"}]}')
        content = data.get("content", [])
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        return Message(role=role, content=tuple(block_from_dict(b) for b in content))


def block_from_dict(data: dict[str, Any]) -> Block:
    kind = data.get("type")
    if kind == "text":
        return TextBlock(text=str(data["text"]))
    if kind == "tool_use":
        return ToolUse(id=str(data["id"]), name=str(data["name"]), input=dict(data.get("input") or {}))
    if kind == "tool_result":
        is_error = bool(data.get("is_error", False))
        kind = data.get("error_kind")
        return ToolResult(tool_use_id=str(data["tool_use_id"]), content=str(data.get("content", "")),
                          is_error=is_error, error_kind=_error_kind(kind) if is_error else None)
    raise ValueError(f"unknown content block type {kind!r}; expected 'text', 'tool_use' or "
                     f"'tool_result', e.g. {{\"type\": \"text\", \"text\": \"hello\"}}")


def _error_kind(value: object) -> ToolErrorKind | None:
    """A stored kind, or None for a trajectory written before kinds existed (or with a kind since retired)."""
    for kind in TOOL_ERROR_KINDS:
        if value == kind:
            return kind
    return None


def system(text: str) -> Message:
    return Message("system", (TextBlock(text),))


def user(text: str) -> Message:
    return Message("user", (TextBlock(text),))

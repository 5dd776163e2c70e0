"""Messages exchanged between the loop and a model: typed, immutable and serialisable.

A trajectory is a list of `Message`. On disk (trajectory.jsonl) each message is one JSON line:
``{"role": "system"|"user"|"assistant", "content": [block, ...]}`` with blocks
``{"type": "text", "text"}``, ``{"type": "tool_use", "id", "name", "input"}`` and
``{"type": "tool_result", "tool_use_id", "content", "is_error"}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Union

Role = Literal["system", "user", "assistant"]


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
    type: Literal["tool_result"] = "tool_result"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "tool_result", "tool_use_id": self.tool_use_id,
                "content": self.content, "is_error": self.is_error}


Block = Union[TextBlock, ToolUse, ToolResult]


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
    def from_dict(data: dict[str, Any]) -> "Message":
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
        return ToolResult(tool_use_id=str(data["tool_use_id"]), content=str(data.get("content", "")),
                          is_error=bool(data.get("is_error", False)))
    raise ValueError(f"unknown content block type {kind!r}; expected 'text', 'tool_use' or "
                     f"'tool_result', e.g. {{\"type\": \"text\", \"text\": \"hello\"}}")


def system(text: str) -> Message:
    return Message("system", (TextBlock(text),))


def user(text: str) -> Message:
    return Message("user", (TextBlock(text),))

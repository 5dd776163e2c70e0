"""The Model protocol: messages and tool specs in, one assistant message out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Sequence

from harness.messages import Message

StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "other"]


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens,
                     self.cache_read_tokens + other.cache_read_tokens,
                     self.cache_write_tokens + other.cache_write_tokens)


@dataclass(frozen=True)
class ModelResponse:
    message: Message                    # role "assistant"
    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)
    raw: dict[str, Any] | None = None   # the provider's response, for debugging


class Model(Protocol):
    name: str

    def respond(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelResponse:
        """One model call. `tools` are `Tool.spec()` dicts.

        Raises:
            harness.errors.ModelError: the call failed after retries or returned nonsense.
        """
        ...

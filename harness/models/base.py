"""The Model protocol: messages and tool specs in, one assistant message out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from harness.messages import Message, ToolUse

ModelStopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "other"]
"""Why the model ended its response (as the provider said it); the loop's own `StopReason` is another thing."""


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens,
                     self.cache_read_tokens + other.cache_read_tokens,
                     self.cache_write_tokens + other.cache_write_tokens)


@dataclass(frozen=True)
class ModelResponse:
    message: Message                    # role "assistant"
    stop_reason: ModelStopReason
    usage: Usage = field(default_factory=Usage)
    raw: dict[str, Any] | None = None   # the provider's response, for debugging


class Model(Protocol):
    name: str

    def respond(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelResponse:
        """One model call. `tools` are `Tool.spec()` dicts.

        Raises:
            harness.errors.ModelTruncated: the response was cut by max_tokens (it must not be run).
            harness.errors.ModelError: the call failed after retries or returned nonsense.
        """
        ...


MALFORMED = "__malformed__"
"""Key of the `input` of a ToolUse the adapter could not read (bad JSON, a ReAct Action out of
format). Its value is {"error": message for the model, "raw": what the model wrote}. The loop answers
such a call with an error observation and never runs it."""


def malformed_call(call_id: str, name: str, raw: str, error: str) -> ToolUse:
    return ToolUse(id=call_id, name=name, input={MALFORMED: {"error": error, "raw": raw}})


def cost_usd(usage: Usage, price: Sequence[float] | None) -> float | None:
    """Cost of `usage` at `price` = [USD per million input tokens, USD per million output tokens].

    Cached reads and writes are counted as input tokens (an upper bound for most providers).
    """
    if not price:
        return None
    inp = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return (inp * float(price[0]) + usage.output_tokens * float(price[1])) / 1_000_000

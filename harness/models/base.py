"""The Model protocol: messages and tool specs in, one assistant message out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from harness.errors import ConfigError
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
    """Cost of `usage` at `price`, USD per million tokens: ``[input, output]`` or ``[input, output,
    cache_read, cache_write]``; None when there is no price (an unknown price is never a cost of 0).

    `usage.input_tokens` counts no cached token (both adapters say so: Anthropic's `input_tokens`
    excludes cache reads and writes; the OpenAI adapter subtracts `cached_tokens`). With two prices,
    cached reads and writes are charged as input (an upper bound for most providers); with four, at
    their own prices.

    Raises:
        ConfigError: `price` is not two or four numbers of at least 0.
    """
    if not price:
        return None
    values = list(price)
    if len(values) not in (2, 4) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                            and math.isfinite(v) and v >= 0 for v in values):
        raise ConfigError(f"a model price must be [input, output] or [input, output, cache_read, cache_write] "
                          f"in USD per million tokens (numbers of at least 0), got {values!r}; e.g. "
                          '{"prices": {"anthropic:claude-sonnet-4-5": [3.0, 15.0, 0.3, 3.75]}}')
    p_in, p_out = float(values[0]), float(values[1])
    p_read, p_write = (float(values[2]), float(values[3])) if len(values) == 4 else (p_in, p_in)
    return (usage.input_tokens * p_in + usage.output_tokens * p_out
            + usage.cache_read_tokens * p_read + usage.cache_write_tokens * p_write) / 1_000_000

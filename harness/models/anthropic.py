"""Anthropic Messages API adapter (native tool use). The SDK is imported when a model is made."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.config import ModelConfig
from harness.errors import ConfigError, ModelError, ModelTruncated
from harness.messages import Block, Message, TextBlock, ToolResult, ToolUse
from harness.models.base import ModelResponse, ModelStopReason, Usage
from harness.models.retry import call_with_retries

INSTALL = 'pip install "harness[anthropic]"  (or: pip install "anthropic>=0.40")'
PROVIDER_STOP_REASONS: dict[str, ModelStopReason] = {"end_turn": "end_turn", "tool_use": "tool_use",
                                                     "max_tokens": "max_tokens", "stop_sequence": "stop_sequence"}
CACHE = {"type": "ephemeral"}


class AnthropicModel:
    def __init__(self, model: str, *, api_key: str, config: ModelConfig, max_tokens: int,
                 base_url: str | None = None) -> None:
        try:
            import anthropic  # noqa: PLC0415 - optional extra (pip install 'harness[anthropic]'), needed only for this model
        except ImportError as exc:
            raise ConfigError(f"the anthropic SDK is not installed; run: {INSTALL}") from exc
        self.name = f"anthropic:{model}"
        self.model = model
        self.config = config
        self.max_tokens = max_tokens
        self._errors: tuple[type[BaseException], ...] = (anthropic.APIError,)
        self._client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0,
                                           timeout=config.request_timeout)

    def respond(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelResponse:
        request = build_request(self.model, messages, tools, self.max_tokens, self.config.temperature)
        raw = call_with_retries(lambda: self._client.messages.create(**request), provider="anthropic",
                                config=self.config, api_errors=self._errors)
        return parse_response(raw.model_dump(mode="json"))


def build_request(model: str, messages: Sequence[Message], tools: Sequence[dict[str, Any]],
                  max_tokens: int, temperature: float | None) -> dict[str, Any]:
    """The Messages API request for `messages`: system text apart, tool results in user turns."""
    system = "\n\n".join(m.text for m in messages if m.role == "system")
    turns: list[dict[str, Any]] = [{"role": m.role, "content": [_block(b) for b in m.content if _keep(b)]}
             for m in messages if m.role != "system"]
    if turns and turns[-1]["content"]:
        turns[-1]["content"][-1] = {**turns[-1]["content"][-1], "cache_control": CACHE}
    request: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": turns}
    if temperature is not None:   # the SDK has no argument for it any more; the API still reads it
        request["extra_body"] = {"temperature": temperature}
    if system:
        request["system"] = [{"type": "text", "text": system, "cache_control": CACHE}]
    if tools:
        request["tools"] = [{"name": t["name"], "description": t["description"],
                             "input_schema": t["input_schema"]} for t in tools]
    return request


def _keep(block: Block) -> bool:
    return not (isinstance(block, TextBlock) and not block.text.strip())


def _block(block: Block) -> dict[str, Any]:
    if isinstance(block, ToolResult):
        return {"type": "tool_result", "tool_use_id": block.tool_use_id,
                "content": block.content or "(no output)", "is_error": block.is_error}
    return block.to_dict()


def parse_response(data: dict[str, Any]) -> ModelResponse:
    """A Messages API response (as JSON) to a ModelResponse; a max_tokens cut raises ModelTruncated."""
    content: list[Block] = []
    for block in data.get("content") or []:
        if block.get("type") == "text":
            content.append(TextBlock(block.get("text", "")))
        elif block.get("type") == "tool_use":
            content.append(ToolUse(id=block["id"], name=block["name"], input=dict(block.get("input") or {})))
    message = Message("assistant", tuple(content))
    stop = data.get("stop_reason")
    if stop == "max_tokens":
        raise ModelTruncated(f"the response was cut at max_tokens ({data.get('usage', {}).get('output_tokens')}"
                             f" output tokens); nothing of it was run; raise loop.max_tokens_per_response. "
                             f"Cut text: {message.text[:300]!r}")
    if not content and stop not in ("end_turn", "stop_sequence"):
        raise ModelError(f"the anthropic response has no text or tool_use block (stop_reason {stop!r}): "
                         f"{str(data)[:300]}")
    u = data.get("usage") or {}
    usage = Usage(input_tokens=u.get("input_tokens") or 0, output_tokens=u.get("output_tokens") or 0,
                  cache_read_tokens=u.get("cache_read_input_tokens") or 0,
                  cache_write_tokens=u.get("cache_creation_input_tokens") or 0)
    return ModelResponse(message=message, stop_reason=PROVIDER_STOP_REASONS.get(stop or "", "other"),
                         usage=usage, raw=data)

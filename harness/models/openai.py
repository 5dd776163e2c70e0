"""OpenAI Chat Completions adapter (function tools); any OpenAI-compatible server via base_url
(vLLM, llama.cpp, Ollama). The SDK is imported when a model is made."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.config import ModelConfig
from harness.errors import ConfigError, ModelError, ModelTruncated
from harness.messages import Block, Message, TextBlock, ToolUse
from harness.models.base import MALFORMED, ModelResponse, ModelStopReason, Usage, malformed_call
from harness.models.retry import call_with_retries

INSTALL = 'pip install "harness[openai]"  (or: pip install "openai>=1.50")'
PROVIDER_STOP_REASONS: dict[str, ModelStopReason] = {"stop": "end_turn", "tool_calls": "tool_use",
                                                     "function_call": "tool_use", "length": "max_tokens"}
ERROR_PREFIX = "ERROR: "


@dataclass(frozen=True)
class ChatDialect:
    """What a server's chat template drops, so that the request says it another way."""

    results_as_user: bool = False   # `tool` messages are dropped (llama-cpp-python's chatml-function-calling):
                                    # each turn's results go as one user message naming each call
    system_as_user: bool = False    # `system` messages are dropped (llama-cpp-python's gemma): the system
                                    # text goes at the top of the first user message


class OpenAIModel:
    def __init__(self, model: str, *, api_key: str | None, config: ModelConfig, max_tokens: int,
                 base_url: str | None = None, dialect: ChatDialect | None = None) -> None:
        try:
            import openai  # noqa: PLC0415 - optional extra (pip install 'harness[openai]'), needed only for this model
        except ImportError as exc:
            raise ConfigError(f"the openai SDK is not installed; run: {INSTALL}") from exc
        self.name = f"openai:{model}"
        self.model = model
        self.config = config
        self.max_tokens = max_tokens
        self.dialect = dialect or ChatDialect()
        # The official API takes max_completion_tokens; compatible servers mostly know max_tokens.
        self.max_tokens_field = "max_tokens" if base_url else "max_completion_tokens"
        self._errors: tuple[type[BaseException], ...] = (openai.APIError,)
        self._client = openai.OpenAI(api_key=api_key or "not-needed", base_url=base_url, max_retries=0,
                                     timeout=config.request_timeout)

    def respond(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelResponse:
        request = build_request(self.model, messages, tools, self.config.temperature, dialect=self.dialect)
        request[self.max_tokens_field] = self.max_tokens
        raw = call_with_retries(lambda: self._client.chat.completions.create(**request), provider="openai",
                                config=self.config, api_errors=self._errors)
        return parse_response(raw.model_dump(mode="json"))


def build_request(model: str, messages: Sequence[Message], tools: Sequence[dict[str, Any]],
                  temperature: float | None, *, dialect: ChatDialect | None = None) -> dict[str, Any]:
    """The Chat Completions request: tool results become `tool` messages right after the call (or
    what `dialect` says instead). `tool_choice` is "auto", the API's default, said explicitly: some
    servers show the model no tools without it."""
    dialect = dialect or ChatDialect()
    out: list[dict[str, Any]] = []
    for m in messages:
        out.extend(_results_as_user(m) if dialect.results_as_user and m.tool_results else _messages(m))
    if dialect.system_as_user:
        out = _system_as_user(out)
    request: dict[str, Any] = {"model": model, "messages": out}
    if temperature is not None:
        request["temperature"] = temperature
    if tools:
        request["tools"] = [{"type": "function", "function": {
            "name": t["name"], "description": t["description"], "parameters": t["input_schema"]}}
            for t in tools]
        request["tool_choice"] = "auto"
    return request


def _messages(m: Message) -> list[dict[str, Any]]:
    if m.role == "system":
        return [{"role": "system", "content": m.text}]
    if m.role == "assistant":
        # null content only beside tool calls: an empty reply is sent back as "" (servers refuse a null alone)
        out: dict[str, Any] = {"role": "assistant", "content": m.text or (None if m.tool_uses else "")}
        if m.tool_uses:
            out["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": _arguments(c)}} for c in m.tool_uses]
        return [out]
    result = [{"role": "tool", "tool_call_id": r.tool_use_id,
               "content": (ERROR_PREFIX if r.is_error else "") + (r.content or "(no output)")}
              for r in m.tool_results]
    if m.text:
        result.append({"role": "user", "content": m.text})
    return result


def _system_as_user(out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    system_text = "\n\n".join(str(m["content"]) for m in out if m["role"] == "system")
    rest = [m for m in out if m["role"] != "system"]
    first_user = next((i for i, m in enumerate(rest) if m["role"] == "user"), None)
    if not system_text:
        return rest
    if first_user is None:
        return [{"role": "user", "content": system_text}, *rest]
    rest[first_user] = {**rest[first_user], "content": f"{system_text}\n\n{rest[first_user]['content']}"}
    return rest


def _results_as_user(m: Message) -> list[dict[str, Any]]:
    parts = [f"Result of call {r.tool_use_id}{' (error)' if r.is_error else ''}:\n"
             f"{(ERROR_PREFIX if r.is_error else '') + (r.content or '(no output)')}" for r in m.tool_results]
    if m.text:
        parts.append(m.text)
    return [{"role": "user", "content": "\n\n".join(parts)}]


def _arguments(call: ToolUse) -> str:
    bad = call.input.get(MALFORMED)
    return str(bad.get("raw", "")) if isinstance(bad, dict) else json.dumps(call.input, ensure_ascii=False)


def parse_response(data: dict[str, Any]) -> ModelResponse:
    """A Chat Completions response (as JSON) to a ModelResponse; a `length` cut raises ModelTruncated."""
    choices = data.get("choices") or []
    if not choices:
        raise ModelError(f"the openai response has no choices: {str(data)[:300]}")
    choice = choices[0]
    msg = choice.get("message") or {}
    content: list[Block] = [TextBlock(msg["content"])] if msg.get("content") else []
    content.extend(_call(c) for c in msg.get("tool_calls") or [])
    message = Message("assistant", tuple(content))
    finish = choice.get("finish_reason") or ""
    u = data.get("usage") or {}
    if finish == "length":
        raise ModelTruncated(f"the response was cut at the token limit (finish_reason 'length'); nothing "
                             f"of it was run; raise loop.max_tokens_per_response. Cut text: {message.text[:300]!r}",
                             partial=message.text,
                             tokens=(u.get("prompt_tokens") or 0, u.get("completion_tokens") or 0))
    cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    usage = Usage(input_tokens=(u.get("prompt_tokens") or 0) - cached,
                  output_tokens=u.get("completion_tokens") or 0, cache_read_tokens=cached)
    stop = PROVIDER_STOP_REASONS.get(finish, "other")
    if stop == "end_turn" and message.tool_uses:
        stop = "tool_use"   # some compatible servers say "stop" after a tool call
    return ModelResponse(message=message, stop_reason=stop, usage=usage, raw=data)


def _call(call: dict[str, Any]) -> ToolUse:
    fn = call.get("function") or {}
    name, raw = str(fn.get("name", "")), fn.get("arguments") or "{}"
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        return malformed_call(call["id"], name, raw, f"the arguments of your call to {name!r} are not valid "
                              f"JSON ({exc}); send one JSON object matching the tool's parameters, "
                              'e.g. {"path": "src/app.py"}')
    if not isinstance(args, dict):
        return malformed_call(call["id"], name, str(raw), f"the arguments of your call to {name!r} must be a "
                              f"JSON object, got {type(args).__name__}: {str(raw)[:200]}; "
                              'e.g. {"path": "src/app.py"}')
    return ToolUse(id=str(call["id"]), name=name, input=args)

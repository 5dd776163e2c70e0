"""The Anthropic Messages API, served: a request body to harness messages and tool specs, a
`ModelResponse` to a `message` (or its event stream), errors in Anthropic's shape.

The mirror image of `harness.models.anthropic`: `system` (a string or text blocks) becomes one system
message, `tool_use` / `tool_result` blocks map one to one, `thinking` blocks are dropped (the harness
keeps none), and `Usage` maps field for field (Anthropic's `input_tokens` counts no cached token either).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from harness.gateway._wire import (
    ParsedCall,
    flag,
    need,
    positive_int,
    read_json,
    shown,
    stop_list,
    text_of,
)
from harness.messages import Block, Message, TextBlock, ToolResult, ToolUse
from harness.models import ModelResponse, Usage

EXAMPLE = ('{"model": "harness", "max_tokens": 1024, "system": "You are a coder.", '
           '"messages": [{"role": "user", "content": "List the files."}]}')
TOOL_EXAMPLE = ('{"name": "bash", "description": "Run a command", "input_schema": {"type": "object", '
                '"properties": {"command": {"type": "string"}}}}')
STOP = {"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens",
        "stop_sequence": "stop_sequence", "other": "end_turn"}
DROPPED = ("thinking", "redacted_thinking")


def parse_request(body: bytes) -> ParsedCall:
    """A Messages API request body as a `ParsedCall`.

    Raises:
        BadRequest: the body is not JSON, or not the shape of a messages request.
    """
    data = read_json(body, EXAMPLE)
    raw = data.get("messages")
    need(isinstance(raw, list) and bool(raw), f"\"messages\" must be a non-empty list, got {shown(raw)}; "
                                              f"e.g. {EXAMPLE}")
    assert isinstance(raw, list)
    system = text_of(data.get("system"), "system", '"system": "You are a coder."')
    messages = [Message("system", (TextBlock(system),))] if system else []
    messages += [_message(m, f"messages[{n}]") for n, m in enumerate(raw)]
    tools = parse_tools(data.get("tools"))
    choice = data.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "none":
        tools = ()
    model = data.get("model")
    need(model is None or isinstance(model, str), f"\"model\" must be a string, got {shown(model)}")
    return ParsedCall(model=str(model or ""), messages=tuple(messages), tools=tools,
                      stream=flag(data.get("stream"), "stream"),
                      max_tokens=positive_int(data.get("max_tokens"), "max_tokens"),
                      stop=stop_list(data.get("stop_sequences"), "stop_sequences"))


def parse_tools(value: object) -> tuple[dict[str, Any], ...]:
    if value is None:
        return ()
    need(isinstance(value, list), f"\"tools\" must be a list, got {shown(value)}; e.g. [{TOOL_EXAMPLE}]")
    assert isinstance(value, list)
    specs = []
    for n, tool in enumerate(value):
        ok = (isinstance(tool, dict) and isinstance(tool.get("name"), str) and bool(tool.get("name"))
              and isinstance(tool.get("input_schema"), dict) and tool.get("type", "custom") == "custom")
        need(ok, f"tools[{n}] is {shown(tool)}: expected a client tool with a name and an input_schema "
                 f"(server tools such as web search are not served: the sandbox has no network); e.g. {TOOL_EXAMPLE}")
        assert isinstance(tool, dict)
        description = tool.get("description", "")
        need(isinstance(description, str), f"tools[{n}].description must be a string, got {shown(description)}")
        specs.append({"name": tool["name"], "description": description, "input_schema": tool["input_schema"]})
    return tuple(specs)


def _message(m: object, where: str) -> Message:
    need(isinstance(m, dict) and m.get("role") in ("user", "assistant"),
         f"{where} is {shown(m)}: expected an object whose role is \"user\" or \"assistant\", "
         'e.g. {"role": "user", "content": "hi"}')
    assert isinstance(m, dict)
    content = m.get("content")
    if isinstance(content, str):
        return Message(m["role"], (TextBlock(content),))
    need(isinstance(content, list), f"{where}.content must be a string or a list of blocks, got {shown(content)}")
    assert isinstance(content, list)
    blocks = [_block(b, f"{where}.content[{i}]") for i, b in enumerate(content)]
    return Message(m["role"], tuple(b for b in blocks if b is not None))


def _block(block: object, where: str) -> Block | None:
    kind = block.get("type") if isinstance(block, dict) else None
    if not isinstance(block, dict) or kind in DROPPED:
        need(isinstance(block, dict), f"{where} must be an object, got {shown(block)}")
        return None
    if kind == "text" and isinstance(block.get("text"), str):
        return TextBlock(block["text"])
    if kind == "tool_use" and isinstance(block.get("id"), str) and isinstance(block.get("name"), str) \
            and isinstance(block.get("input", {}), dict):
        return ToolUse(id=block["id"], name=block["name"], input=dict(block.get("input") or {}))
    if kind == "tool_result" and isinstance(block.get("tool_use_id"), str):
        is_error = flag(block.get("is_error"), f"{where}.is_error")
        text = text_of(block.get("content"), f"{where}.content", '"content": "file.txt"')
        return ToolResult(tool_use_id=block["tool_use_id"], content=text, is_error=is_error,
                          error_kind="tool" if is_error else None)
    need(False, f"{where} is {shown(block)}: expected a text, tool_use or tool_result block (images and "
                'documents are not forwarded); e.g. {"type": "tool_result", "tool_use_id": "toolu_1", '
                '"content": "ok"}')
    return None


def _content(message: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b in message.content:
        if isinstance(b, TextBlock) and b.text:
            out.append({"type": "text", "text": b.text})
        elif isinstance(b, ToolUse):
            out.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.input})
    return out


def usage_of(usage: Usage) -> dict[str, Any]:
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "cache_read_input_tokens": usage.cache_read_tokens,
            "cache_creation_input_tokens": usage.cache_write_tokens}


def stop_reason(response: ModelResponse) -> str:
    return "tool_use" if response.message.tool_uses else STOP[response.stop_reason]


def message_body(response: ModelResponse, model: str, stop_sequence: str | None = None) -> dict[str, Any]:
    """The `message` object answering with `response`."""
    return {"id": f"msg_{uuid.uuid4().hex}", "type": "message", "role": "assistant", "model": model,
            "content": _content(response.message), "stop_reason": stop_reason(response),
            "stop_sequence": stop_sequence, "usage": usage_of(response.usage)}


def events(response: ModelResponse, model: str, stop_sequence: str | None = None) -> list[tuple[str, Any]]:
    """The stream carrying `response` whole: message_start, each block's start/delta/stop,
    message_delta (stop reason, output tokens), message_stop."""
    whole = message_body(response, model, stop_sequence)
    start = {**whole, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**whole["usage"], "output_tokens": 0}}
    out: list[tuple[str, Any]] = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(whole["content"]):
        first: dict[str, Any]
        if block["type"] == "text":
            first, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            first = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"], ensure_ascii=False)}
        out += [("content_block_start", {"type": "content_block_start", "index": i, "content_block": first}),
                ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": i})]
    out += [("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": stop_sequence},
                               "usage": {"output_tokens": response.usage.output_tokens}}),
            ("message_stop", {"type": "message_stop"})]
    return out


def error_body(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    """Anthropic's error shape."""
    return {"type": "error", "error": {"type": kind, "message": message}}


__all__ = ["error_body", "events", "message_body", "parse_request"]

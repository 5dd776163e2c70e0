"""The OpenAI Chat Completions API, served: a request body to harness messages and tool specs, a
`ModelResponse` to a `chat.completion` (or its `chat.completion.chunk` stream), errors in OpenAI's shape.

The mirror image of `harness.models.openai`: `tool` messages become `ToolResult` blocks of one user
message (a user text right after them joins it), assistant `tool_calls` become `ToolUse` blocks (their
JSON-string arguments parsed; unreadable ones kept as `MALFORMED`, as the adapter does), and
`prompt_tokens` counts every input token, cached ones included (`Usage.input_tokens` does not).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from harness.gateway._wire import (
    BadRequest,
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
from harness.models import MALFORMED, ModelResponse, Usage

EXAMPLE = ('{"model": "harness", "messages": [{"role": "system", "content": "You are a coder."}, '
           '{"role": "user", "content": "List the files."}]}')
TOOL_EXAMPLE = ('{"type": "function", "function": {"name": "bash", "description": "Run a command", '
                '"parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}')
FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "stop_sequence": "stop",
          "other": "stop"}
ROLES = ("system", "developer", "user", "assistant", "tool")


def parse_request(body: bytes) -> ParsedCall:
    """A Chat Completions request body as a `ParsedCall`.

    Raises:
        BadRequest: the body is not JSON, or not the shape of a chat completions request.
    """
    data = read_json(body, EXAMPLE)
    raw = data.get("messages")
    need(isinstance(raw, list) and bool(raw), f"\"messages\" must be a non-empty list, got {shown(raw)}; "
                                              f"e.g. {EXAMPLE}")
    need(data.get("n") in (None, 1), f"\"n\" must be 1 (one answer per call), got {shown(data.get('n'))}")
    need("functions" not in data, "\"functions\" (the legacy function-calling field) is not served; send "
                                  f"\"tools\" instead, e.g. \"tools\": [{TOOL_EXAMPLE}]")
    assert isinstance(raw, list)
    tools = parse_tools(data.get("tools"))
    if data.get("tool_choice") == "none":
        tools = ()
    options = data.get("stream_options")
    need(options is None or isinstance(options, dict),
         f"\"stream_options\" must be an object, got {shown(options)}; e.g. {{\"include_usage\": true}}")
    model = data.get("model")
    need(model is None or isinstance(model, str), f"\"model\" must be a string, got {shown(model)}")
    max_tokens = positive_int(data.get("max_completion_tokens"), "max_completion_tokens")
    return ParsedCall(
        model=str(model or ""), messages=parse_messages(raw), tools=tools, stream=flag(data.get("stream"), "stream"),
        include_usage=flag((options or {}).get("include_usage"), "stream_options.include_usage"),
        max_tokens=max_tokens or positive_int(data.get("max_tokens"), "max_tokens"),
        stop=stop_list(data.get("stop"), "stop"))


def parse_tools(value: object) -> tuple[dict[str, Any], ...]:
    """`tools` as harness tool specs ({"name", "description", "input_schema"})."""
    if value is None:
        return ()
    need(isinstance(value, list), f"\"tools\" must be a list, got {shown(value)}; e.g. [{TOOL_EXAMPLE}]")
    assert isinstance(value, list)
    specs = []
    for n, tool in enumerate(value):
        fn = tool.get("function") if isinstance(tool, dict) else None
        need(isinstance(tool, dict) and tool.get("type", "function") == "function" and isinstance(fn, dict)
             and isinstance(fn.get("name"), str) and bool(fn.get("name")),
             f"tools[{n}] is {shown(tool)}: expected a function tool with a name, e.g. {TOOL_EXAMPLE}")
        assert isinstance(fn, dict)
        params = fn.get("parameters", {"type": "object", "properties": {}})
        description = fn.get("description", "")
        need(isinstance(params, dict), f"tools[{n}].function.parameters must be a JSON Schema object, got "
                                       f"{shown(params)}; e.g. {TOOL_EXAMPLE}")
        need(isinstance(description, str), f"tools[{n}].function.description must be a string, got "
                                           f"{shown(description)}")
        specs.append({"name": fn["name"], "description": description, "input_schema": params})
    return tuple(specs)


def parse_messages(raw: list[Any]) -> tuple[Message, ...]:
    """The `messages` list as harness messages: each run of `tool` messages (and a user text right
    after it) is one user message, as the harness keeps a turn's results."""
    out: list[Message] = []
    results: list[Block] = []          # the current run of tool results, not yet a message
    for n, m in enumerate(raw):
        where = f"messages[{n}]"
        need(isinstance(m, dict) and m.get("role") in ROLES,
             f"{where} is {shown(m)}: expected an object whose role is one of {list(ROLES)}, "
             'e.g. {"role": "user", "content": "hi"}')
        role = m["role"]
        if role == "tool":
            results.append(_tool_result(m, where))
            continue
        text = text_of(m.get("content"), f"{where}.content", '"content": "hi"')
        if results:
            if role == "user":
                out.append(Message("user", (*results, TextBlock(text))))
                results = []
                continue
            out.append(Message("user", tuple(results)))
            results = []
        if role in ("system", "developer"):
            out.append(Message("system", (TextBlock(text),)))
        elif role == "user":
            out.append(Message("user", (TextBlock(text),)))
        else:
            calls = [_tool_use(c, f"{where}.tool_calls[{i}]") for i, c in enumerate(_list(m, "tool_calls", where))]
            out.append(Message("assistant", ((TextBlock(text),) if text else ()) + tuple(calls)))
    if results:
        out.append(Message("user", tuple(results)))
    return tuple(out)


def _list(m: dict[str, Any], key: str, where: str) -> list[Any]:
    value = m.get(key) or []
    need(isinstance(value, list), f"{where}.{key} must be a list, got {shown(value)}")
    assert isinstance(value, list)
    return value


def _tool_result(m: dict[str, Any], where: str) -> ToolResult:
    call_id = m.get("tool_call_id")
    need(isinstance(call_id, str) and bool(call_id), f"{where}.tool_call_id must name the call answered, got "
         f"{shown(call_id)}; e.g. {{\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": \"ok\"}}")
    return ToolResult(tool_use_id=str(call_id), content=text_of(m.get("content"), f"{where}.content",
                                                                '"content": "file.txt"'))


def _tool_use(call: object, where: str) -> ToolUse:
    fn = call.get("function") if isinstance(call, dict) else None
    example = ('{"id": "call_1", "type": "function", "function": {"name": "bash", '
               '"arguments": "{\\"command\\": \\"ls\\"}"}}')
    need(isinstance(call, dict) and isinstance(call.get("id"), str) and isinstance(fn, dict)
         and isinstance(fn.get("name"), str), f"{where} is {shown(call)}: expected e.g. {example}")
    assert isinstance(call, dict) and isinstance(fn, dict)
    raw = fn.get("arguments")
    raw = "{}" if raw in (None, "") else raw
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except (json.JSONDecodeError, RecursionError):
        args = None
    if not isinstance(args, dict):     # the model's own unreadable call, resent in the history: kept as it was
        args = {MALFORMED: {"error": "the arguments are not a JSON object", "raw": str(raw)}}
    return ToolUse(id=call["id"], name=fn["name"], input=args)


def arguments(call: ToolUse) -> str:
    """A call's input as the JSON-string `arguments` (an unreadable call's raw text, as the adapter sends it)."""
    bad = call.input.get(MALFORMED)
    return str(bad.get("raw", "")) if isinstance(bad, dict) else json.dumps(call.input, ensure_ascii=False)


def usage_of(usage: Usage) -> dict[str, Any]:
    prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return {"prompt_tokens": prompt, "completion_tokens": usage.output_tokens,
            "total_tokens": prompt + usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens}}


def finish_reason(response: ModelResponse) -> str:
    return "tool_calls" if response.message.tool_uses else FINISH[response.stop_reason]


def _tool_calls(message: Message) -> list[dict[str, Any]]:
    return [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments(c)}}
            for c in message.tool_uses]


def completion(response: ModelResponse, model: str) -> dict[str, Any]:
    """The `chat.completion` object answering with `response`."""
    message: dict[str, Any] = {"role": "assistant", "content": response.message.text or None}
    if response.message.tool_uses:
        message["tool_calls"] = _tool_calls(response.message)
    return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(response),
                                         "logprobs": None}],
            "usage": usage_of(response.usage)}


def chunks(response: ModelResponse, model: str, *, include_usage: bool) -> list[dict[str, Any]]:
    """The `chat.completion.chunk` objects of a stream carrying `response` whole: the role, the text,
    each tool call, the finish reason, then (when asked) the usage."""
    base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        out = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
        return {**out, "usage": None} if include_usage else out

    out = [chunk({"role": "assistant", "content": ""})]
    if response.message.text:
        out.append(chunk({"content": response.message.text}))
    for i, call in enumerate(_tool_calls(response.message)):
        out.append(chunk({"tool_calls": [{"index": i, **call}]}))
    out.append(chunk({}, finish_reason(response)))
    if include_usage:
        out.append({**base, "choices": [], "usage": usage_of(response.usage)})
    return out


def models_list(name: str) -> dict[str, Any]:
    """GET /v1/models: the one model the gateway serves."""
    return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "harness"}]}


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None) -> dict[str, Any]:
    """OpenAI's error shape."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


__all__ = ["BadRequest", "chunks", "completion", "error_body", "models_list", "parse_request"]

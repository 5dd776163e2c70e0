"""The Anthropic adapter against a local server speaking the Messages API."""

from __future__ import annotations

import dataclasses

import pytest

from harness.agent.loop import price_of, run_loop
from harness.config import Config, ModelConfig
from harness.errors import ModelError, ModelTruncated
from harness.messages import Message, TextBlock, ToolResult, ToolUse, system, user
from harness.models.anthropic import AnthropicModel
from harness.tools.base import ToolContext
from harness.tools.catalog import Catalog

TOOLS = [{"name": "bash", "description": "Run a shell command.",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                           "required": ["command"], "additionalProperties": False}}]
FAST = ModelConfig(max_retries=2, retry_initial_seconds=0.01, retry_max_seconds=0.02, request_timeout=5)


def _model(url: str, config: ModelConfig = FAST) -> AnthropicModel:
    return AnthropicModel("claude-test", api_key="sk-test", config=config, max_tokens=1000, base_url=url)


def _reply(content: list[dict], stop: str = "end_turn", **usage: int) -> dict:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": content,
            "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 11, "output_tokens": 7, **usage}}


CONVERSATION = [
    system("You repair code."),
    user("Fix the bug."),
    Message("assistant", (TextBlock("Looking."), ToolUse("toolu_1", "bash", {"command": "ls"}))),
    Message("user", (ToolResult("toolu_1", "setup.py", is_error=False),)),
]


def test_request_maps_system_tools_and_tool_results_to_messages_api(provider) -> None:
    provider.reply(200, _reply([{"type": "text", "text": "ok"}]))
    _model(provider.url).respond(CONVERSATION, TOOLS)
    [req] = provider.requests
    assert req.path == "/v1/messages"
    assert "sk-test" in (req.headers.get("x-api-key", ""), req.headers.get("authorization", "").removeprefix("Bearer "))
    body = req.body
    assert body["model"] == "claude-test" and body["max_tokens"] == 1000 and "temperature" not in body
    assert body["system"][0]["text"] == "You repair code."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"][1] == {"type": "tool_use", "id": "toolu_1", "name": "bash",
                                                 "input": {"command": "ls"}}
    result = body["messages"][2]["content"][0]
    assert (result["type"], result["tool_use_id"], result["content"], result["is_error"]) == \
        ("tool_result", "toolu_1", "setup.py", False)
    assert body["tools"] == TOOLS


def test_response_maps_text_tool_use_stop_reason_and_usage(provider) -> None:
    provider.reply(200, _reply([{"type": "text", "text": "Run it."},
                                {"type": "tool_use", "id": "toolu_9", "name": "bash", "input": {"command": "pytest"}}],
                               stop="tool_use", cache_read_input_tokens=5, cache_creation_input_tokens=3))
    response = _model(provider.url).respond(CONVERSATION[:2], TOOLS)
    assert response.stop_reason == "tool_use"
    assert response.message.text == "Run it."
    assert response.message.tool_uses == [ToolUse("toolu_9", "bash", {"command": "pytest"})]
    assert (response.usage.input_tokens, response.usage.output_tokens,
            response.usage.cache_read_tokens, response.usage.cache_write_tokens) == (11, 7, 5, 3)


def test_max_tokens_response_raises_truncated_and_is_not_returned(provider) -> None:
    provider.reply(200, _reply([{"type": "tool_use", "id": "t", "name": "bash", "input": {}}], stop="max_tokens"))
    with pytest.raises(ModelTruncated, match="cut at max_tokens"):
        _model(provider.url).respond(CONVERSATION[:2], TOOLS)


def test_rate_limit_is_retried_then_succeeds(provider) -> None:
    err = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    provider.reply(429, err)
    provider.reply(529, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
    provider.reply(200, _reply([{"type": "text", "text": "fine"}]))
    response = _model(provider.url).respond(CONVERSATION[:2], TOOLS)
    assert response.message.text == "fine"
    assert len(provider.requests) == 3


def test_authentication_error_is_not_retried(provider) -> None:
    provider.reply(401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})
    provider.reply(200, _reply([{"type": "text", "text": "never reached"}]))
    with pytest.raises(ModelError, match=r"HTTP 401\) after 1 attempt.*check the API key"):
        _model(provider.url).respond(CONVERSATION[:2], TOOLS)
    assert len(provider.requests) == 1


def test_persistent_server_error_gives_up_after_bounded_attempts(provider) -> None:
    for _ in range(5):
        provider.reply(500, {"type": "error", "error": {"type": "api_error", "message": "boom"}})
    with pytest.raises(ModelError, match=r"HTTP 500\) after 3 attempt"):
        _model(provider.url).respond(CONVERSATION[:2], TOOLS)
    assert len(provider.requests) == 3   # max_retries=2: one try and two retries


def test_api_failure_that_survives_retries_stops_the_loop_as_error(provider) -> None:
    for _ in range(3):
        provider.reply(529, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
    ctx = ToolContext(sandbox=None, session="t")  # type: ignore[arg-type]
    result = run_loop(_model(provider.url), Catalog(), ctx, CONVERSATION[:2], Config())
    assert result.stop_reason == "error" and "HTTP 529) after 3 attempt(s)" in result.final_text
    assert result.turns == 0 and result.messages == CONVERSATION[:2]


def test_price_is_found_for_a_react_wrapped_model() -> None:
    cfg = Config()
    cfg = cfg.replace(model=dataclasses.replace(cfg.model, prices={"anthropic:claude-test": [3.0, 15.0]}))
    assert price_of(cfg, "anthropic:claude-test+react") == [3.0, 15.0]
    assert price_of(cfg, "openai:other") is None

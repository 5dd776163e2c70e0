"""The OpenAI-compatible adapter against a local server speaking Chat Completions."""

from __future__ import annotations

import json
import socket

import pytest

from harness.config import ModelConfig
from harness.errors import ModelError, ModelTruncated
from harness.messages import Message, TextBlock, ToolResult, ToolUse, system, user
from harness.models.base import MALFORMED
from harness.models.openai import ChatDialect, OpenAIModel, build_request, parse_response
from harness.models.react import ReActModel

TOOLS = [{"name": "bash", "description": "Run a shell command.",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                           "required": ["command"], "additionalProperties": False}}]
FAST = ModelConfig(max_retries=2, retry_initial_seconds=0.01, retry_max_seconds=0.02, request_timeout=5)


def _model(url: str, config: ModelConfig = FAST) -> OpenAIModel:
    return OpenAIModel("gpt-test", api_key="sk-test", config=config, max_tokens=900, base_url=f"{url}/v1")


def _reply(message: dict, finish: str = "stop") -> dict:
    return {"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-test",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24,
                      "prompt_tokens_details": {"cached_tokens": 8}}}


def _call(id: str, name: str, arguments: str) -> dict:
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


CONVERSATION = [
    system("You repair code."),
    user("Fix the bug."),
    Message("assistant", (TextBlock("Looking."), ToolUse("call_1", "bash", {"command": "ls"}),
                          ToolUse("call_2", "bash", {"command": "cat x"}))),
    Message("user", (ToolResult("call_1", "setup.py"), ToolResult("call_2", "no such file", is_error=True))),
]


def test_request_maps_tool_calls_and_results_to_chat_completions(provider) -> None:
    provider.reply(200, _reply({"content": "ok"}))
    _model(provider.url).respond(CONVERSATION, TOOLS)
    [req] = provider.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test"
    body = req.body
    assert body["model"] == "gpt-test" and body["max_tokens"] == 900
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "tool"]
    assistant = body["messages"][2]
    assert assistant["content"] == "Looking."
    assert assistant["tool_calls"][0] == _call("call_1", "bash", json.dumps({"command": "ls"}))
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "setup.py"}
    assert body["messages"][4] == {"role": "tool", "tool_call_id": "call_2", "content": "ERROR: no such file"}
    assert body["tools"] == [{"type": "function", "function": {
        "name": "bash", "description": "Run a shell command.", "parameters": TOOLS[0]["input_schema"]}}]


def test_official_endpoint_gets_max_completion_tokens(provider) -> None:
    model = OpenAIModel("gpt-test", api_key="sk-test", config=FAST, max_tokens=900)
    assert model.max_tokens_field == "max_completion_tokens"
    assert _model(provider.url).max_tokens_field == "max_tokens"


def test_response_maps_tool_calls_and_usage(provider) -> None:
    provider.reply(200, _reply({"content": None, "tool_calls": [_call("call_7", "bash", '{"command": "pytest"}')]},
                               finish="tool_calls"))
    response = _model(provider.url).respond(CONVERSATION[:2], TOOLS)
    assert response.stop_reason == "tool_use"
    assert response.message.tool_uses == [ToolUse("call_7", "bash", {"command": "pytest"})]
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.cache_read_tokens) == (12, 4, 8)


def test_arguments_that_are_not_json_become_a_malformed_call_with_the_expected_format(provider) -> None:
    provider.reply(200, _reply({"content": None, "tool_calls": [_call("call_3", "bash", '{"command": "ls"')]},
                               finish="tool_calls"))
    [call] = _model(provider.url).respond(CONVERSATION[:2], TOOLS).message.tool_uses
    bad = call.input[MALFORMED]
    assert bad["raw"] == '{"command": "ls"'
    assert "are not valid JSON" in bad["error"] and 'e.g. {"path": "src/app.py"}' in bad["error"]
    # positive control: the same call with valid JSON is an ordinary call
    provider.reply(200, _reply({"content": None, "tool_calls": [_call("call_4", "bash", '{"command": "ls"}')]},
                               finish="tool_calls"))
    assert _model(provider.url).respond(CONVERSATION[:2], TOOLS).message.tool_uses[0].input == {"command": "ls"}


def test_length_finish_raises_truncated(provider) -> None:
    provider.reply(200, _reply({"content": "Let me think about this very long"}, finish="length"))
    with pytest.raises(ModelTruncated, match="finish_reason 'length'"):
        _model(provider.url).respond(CONVERSATION[:2], TOOLS)


def test_server_errors_are_retried_and_bad_requests_are_not(provider) -> None:
    provider.reply(503, {"error": {"message": "unavailable"}})
    provider.reply(200, _reply({"content": "fine"}))
    assert _model(provider.url).respond(CONVERSATION[:2], TOOLS).message.text == "fine"
    assert len(provider.requests) == 2
    provider.reply(400, {"error": {"message": "messages: bad role"}})
    with pytest.raises(ModelError, match=r"HTTP 400\) after 1 attempt"):
        _model(provider.url).respond(CONVERSATION[:2], TOOLS)
    assert len(provider.requests) == 3


def test_unreachable_server_is_retried_as_a_connection_error() -> None:
    with socket.socket() as s:   # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ModelError, match=r"APIConnectionError\) after 3 attempt"):
        _model(f"http://127.0.0.1:{port}").respond(CONVERSATION[:2], TOOLS)


def test_react_over_a_compatible_server_sends_text_only_and_parses_the_action(provider) -> None:
    provider.reply(200, _reply({"content": 'Thought: list files\nAction: bash\nAction Input: {"command": "ls"}\n'
                                           "Observation: setup.py"}))
    response = ReActModel(_model(provider.url)).respond(CONVERSATION, TOOLS)
    body = provider.requests[0].body
    assert "tools" not in body and all("tool_calls" not in m and m["role"] != "tool" for m in body["messages"])
    assert "Action Input: one JSON object" in body["messages"][0]["content"]
    assert body["messages"][2]["content"] == ('Looking.\nAction: bash\nAction Input: {"command": "ls"}\n'
                                              'Action: bash\nAction Input: {"command": "cat x"}')
    assert body["messages"][3]["content"] == "Observation:\nsetup.py\n\nObservation (error):\nno such file"
    assert response.message.tool_uses == [ToolUse("react-4", "bash", {"command": "ls"})]
    assert response.message.text == "Thought: list files"


def test_tools_go_with_tool_choice_auto_said_explicitly(provider) -> None:
    provider.reply(200, _reply({"content": "ok"}))
    _model(provider.url).respond(CONVERSATION, TOOLS)
    provider.reply(200, _reply({"content": "ok"}))
    _model(provider.url).respond(CONVERSATION, [])
    with_tools, without = (r.body for r in provider.requests)
    assert with_tools["tool_choice"] == "auto"   # llama-cpp-python shows the model no tools without it
    assert "tool_choice" not in without and "tools" not in without


def test_an_empty_reply_is_sent_back_with_empty_text_not_null() -> None:
    request = build_request("m", [user("go"), Message("assistant", ()), user("again")], [], None)
    assert request["messages"][1] == {"role": "assistant", "content": ""}


def test_dialect_results_as_user_names_each_call_in_one_user_message() -> None:
    request = build_request("m", CONVERSATION, TOOLS, None, dialect=ChatDialect(results_as_user=True))
    roles = [m["role"] for m in request["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert request["messages"][3]["content"] == ("Result of call call_1:\nsetup.py\n\n"
                                                 "Result of call call_2 (error):\nERROR: no such file")


def test_dialect_system_as_user_puts_the_system_text_atop_the_first_user_message() -> None:
    request = build_request("m", CONVERSATION[:2], [], None, dialect=ChatDialect(system_as_user=True))
    assert request["messages"] == [{"role": "user", "content": "You repair code.\n\nFix the bug."}]


def test_a_cut_response_carries_its_text_and_tokens() -> None:
    with pytest.raises(ModelTruncated) as info:
        parse_response(_reply({"content": "Thought: x\nAction: bash\nAction Input: {\"command\": \"ls\"}\nObs"},
                              finish="length"))
    assert info.value.partial.startswith("Thought: x\nAction: bash") and info.value.tokens == (20, 4)

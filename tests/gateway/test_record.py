"""calls.jsonl holds every request, conversation() the latest history and its answer; failures of the
model become 502 (or a `length` answer when a cut left text)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.errors import ModelError
from harness.gateway import Gateway, read_records
from harness.messages import Message, TextBlock, ToolUse
from harness.models import ModelResponse
from harness.models.scripted import ScriptedModel
from sandbox.loopback import HttpRequest
from tests.gateway.conftest import bash_then_done

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def _ask(messages: list[dict[str, object]], **extra: object) -> HttpRequest:
    body = json.dumps({"model": "m", "messages": messages, "tools": TOOLS, **extra}).encode()
    return HttpRequest("POST", "/v1/chat/completions", (("Authorization", "Bearer dummy"),), body)


def test_each_call_is_recorded_with_messages_tools_response_usage_and_cost(tmp_path: Path) -> None:
    gateway = Gateway(bash_then_done(), price=[3.0, 15.0], record=tmp_path / "calls.jsonl")
    first = [{"role": "user", "content": "hi \x1b[31mred\x1b[0m"}]
    answer = json.loads(gateway.handle(_ask(first)).body)
    call = answer["choices"][0]["message"]
    history = [*first, call, {"role": "tool", "tool_call_id": "call_1", "content": "out"}]
    gateway.handle(_ask(history))
    gateway.handle(HttpRequest("GET", "http://example.org/", (), b""))
    raw = (tmp_path / "calls.jsonl").read_text()
    assert "\x1b" not in raw and "\\u001b[31m" in raw            # hostile text escaped in the file, not lost
    assert "Bearer" not in raw and "dummy" not in raw            # the sandbox's dummy key goes nowhere
    records = read_records(tmp_path / "calls.jsonl")
    assert [r["outcome"] for r in records] == ["answered", "answered", "refused"]
    one = records[0]
    assert one["route"] == "/v1/chat/completions" and one["api"] == "openai" and one["status"] == 200
    assert one["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi \x1b[31mred\x1b[0m"}]}]
    assert one["tools"] == ["bash"]
    assert one["response"]["content"][1] == {"type": "tool_use", "id": "call_1", "name": "bash",
                                             "input": {"command": "ls -la"}}
    assert one["usage"] == {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 30, "cache_write_tokens": 0}
    assert one["cost_usd"] == (130 * 3.0 + 20 * 15.0) / 1e6
    assert isinstance(one["seconds"], float) and one["time"].endswith("+00:00")
    assert gateway.totals.calls == 2 and gateway.totals.cost_usd == 2 * one["cost_usd"]
    conversation = gateway.conversation()
    assert [m.role for m in conversation] == ["user", "assistant", "user", "assistant"]
    assert conversation[-1] == Message("assistant", (TextBlock("All done."),))
    assert conversation[1].content[1] == ToolUse("call_1", "bash", {"command": "ls -la"})


class _Failing:
    name = "failing"

    def __init__(self, error: ModelError) -> None:
        self.error = error

    def respond(self, messages: object, tools: object) -> ModelResponse:
        raise self.error


def test_a_model_failure_after_retries_is_a_502_in_the_providers_shape(tmp_path: Path) -> None:
    gateway = Gateway(_Failing(ModelError("anthropic API call failed (HTTP 529) after 5 attempt(s)")),
                      record=tmp_path / "calls.jsonl")
    answer = gateway.handle(_ask([{"role": "user", "content": "hi"}]))
    assert answer.status == 502
    assert "HTTP 529" in json.loads(answer.body)["error"]["message"]
    anthropic = gateway.handle(HttpRequest("POST", "/v1/messages", (), json.dumps(
        {"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}).encode()))
    assert anthropic.status == 502 and json.loads(anthropic.body)["error"]["type"] == "api_error"
    assert [r["outcome"] for r in read_records(tmp_path / "calls.jsonl")] == ["model_error", "model_error"]
    assert gateway.exhausted is None and gateway.totals.calls == 0


def test_a_cut_response_with_text_is_answered_with_finish_reason_length() -> None:
    model = ScriptedModel([{"content": [{"type": "text", "text": "half an ans"}], "stop_reason": "max_tokens",
                            "usage": {"input_tokens": 7, "output_tokens": 9}}])
    answer = json.loads(Gateway(model).handle(_ask([{"role": "user", "content": "hi"}])).body)
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["choices"][0]["message"]["content"] == "half an ans"
    assert answer["usage"]["completion_tokens"] == 9


def test_a_finished_recording_is_refused_with_400_and_named_in_exhausted() -> None:
    gateway = Gateway(ScriptedModel([[{"type": "text", "text": "only"}]]))
    assert gateway.handle(_ask([{"role": "user", "content": "hi"}])).status == 200
    answer = gateway.handle(_ask([{"role": "user", "content": "again"}]))
    assert answer.status == 400 and "has 1 turn(s)" in json.loads(answer.body)["error"]["message"]
    assert gateway.exhausted is not None and gateway.exhausted.budget == "recording"

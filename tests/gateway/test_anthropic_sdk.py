"""The real `anthropic` SDK against the gateway over real HTTP: tool_use / tool_result, streaming, usage."""

from __future__ import annotations

import anthropic

from harness.gateway import Gateway
from harness.messages import TextBlock, ToolResult, ToolUse
from harness.models.scripted import ScriptedModel
from tests.gateway.conftest import served

BASH = {"name": "bash", "description": "Run a shell command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}
FIRST = [{"role": "user", "content": "List the files."}]


def _client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="dummy-key-held-by-the-sandbox", max_retries=0, timeout=10)


def test_a_tool_use_and_its_result_cross_the_anthropic_sdk_both_ways(scripted: ScriptedModel) -> None:
    with served(Gateway(scripted)) as url:
        client = _client(url)
        first = client.messages.create(model="claude-x", max_tokens=1024, messages=FIRST, tools=[BASH],
                                       system=[{"type": "text", "text": "You are a coder.",
                                                "cache_control": {"type": "ephemeral"}}])
        assert first.stop_reason == "tool_use"
        assert [b.type for b in first.content] == ["text", "tool_use"]
        use = first.content[1]
        assert (use.id, use.name, use.input) == ("call_1", "bash", {"command": "ls -la"})
        u = first.usage
        assert (u.input_tokens, u.output_tokens, u.cache_read_input_tokens) == (100, 20, 30)
        history = [*FIRST, {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1",
                                                 "content": [{"type": "text", "text": "a.py"}], "is_error": True}]}]
        second = client.messages.create(model="claude-x", max_tokens=1024, messages=history, tools=[BASH])
    assert (second.stop_reason, second.content[0].text) == ("end_turn", "All done.")
    assert [(m.role, m.text) for m in scripted.received[0]] == [("system", "You are a coder."),
                                                               ("user", "List the files.")]
    sent = scripted.received[1]
    assert [m.role for m in sent] == ["user", "assistant", "user"]
    assert sent[1].content == (TextBlock("Looking."), ToolUse("call_1", "bash", {"command": "ls -la"}))
    assert sent[2].content == (ToolResult("call_1", "a.py", is_error=True, error_kind="tool"),)


def test_a_streamed_message_assembles_into_the_same_blocks(scripted: ScriptedModel) -> None:
    with served(Gateway(scripted)) as url, _client(url).messages.stream(
            model="claude-x", max_tokens=1024, messages=FIRST, tools=[BASH]) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert final.stop_reason == "tool_use"
    assert final.content[0].text == "Looking."
    assert (final.content[1].name, final.content[1].input) == ("bash", {"command": "ls -la"})
    assert final.usage.output_tokens == 20


def test_a_stop_sequence_is_named_in_the_answer() -> None:
    model = ScriptedModel([[{"type": "text", "text": "alpha STOP beta"}]])
    with served(Gateway(model)) as url:
        answer = _client(url).messages.create(model="m", max_tokens=10, messages=FIRST,
                                              stop_sequences=["STOP"])
    assert (answer.content[0].text, answer.stop_reason, answer.stop_sequence) == (
        "alpha ", "stop_sequence", "STOP")

"""The real `openai` SDK against the gateway over real HTTP: calls, tool calls, streaming, usage."""

from __future__ import annotations

import json
from pathlib import Path

import openai

from harness.gateway import Gateway, read_records
from harness.messages import TextBlock, ToolResult, ToolUse
from harness.models.scripted import ScriptedModel
from tests.gateway.conftest import served

BASH = {"type": "function", "function": {"name": "bash", "description": "Run a shell command",
                                         "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                                                        "required": ["command"]}}}
FIRST = [{"role": "system", "content": "You are a coder."}, {"role": "user", "content": "List the files."}]


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="dummy-key-held-by-the-sandbox", max_retries=0, timeout=10)


def test_a_tool_call_and_its_result_cross_the_openai_sdk_both_ways(scripted: ScriptedModel, tmp_path: Path) -> None:
    gateway = Gateway(scripted, record=tmp_path / "calls.jsonl")
    with served(gateway) as url:
        client = _client(url)
        first = client.chat.completions.create(model="gpt-x", messages=FIRST, tools=[BASH])
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert choice.message.content == "Looking."
        call = choice.message.tool_calls[0]
        assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
            "call_1", "bash", {"command": "ls -la"})
        assert first.usage is not None
        assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (130, 20)   # cached reads included
        assert first.usage.prompt_tokens_details.cached_tokens == 30
        assert first.model == "gpt-x"
        history = [*FIRST, choice.message.model_dump(exclude_none=True),
                   {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
                   {"role": "user", "content": "Go on."}]
        second = client.chat.completions.create(model="gpt-x", messages=history, tools=[BASH])
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "All done."
    sent = scripted.received[1]
    assert [m.role for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[2].content == (TextBlock("Looking."), ToolUse("call_1", "bash", {"command": "ls -la"}))
    assert sent[3].content == (ToolResult("call_1", "a.py\nb.py"), TextBlock("Go on."))   # one turn, as ours
    assert [r["outcome"] for r in read_records(tmp_path / "calls.jsonl")] == ["answered", "answered"]


def test_a_streamed_answer_carries_text_tool_call_finish_reason_and_usage(scripted: ScriptedModel) -> None:
    with served(Gateway(scripted)) as url:
        stream = _client(url).chat.completions.create(model="m", messages=FIRST, tools=[BASH], stream=True,
                                                      stream_options={"include_usage": True})
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [t for c in chunks if c.choices for t in (c.choices[0].delta.tool_calls or [])]
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    usage = [c.usage for c in chunks if c.usage]
    assert text == "Looking."
    assert [(t.id, t.function.name, t.function.arguments) for t in calls] == [
        ("call_1", "bash", '{"command": "ls -la"}')]
    assert finish == ["tool_calls"]
    assert [(u.prompt_tokens, u.completion_tokens) for u in usage] == [(130, 20)]


def test_the_sdks_stream_helper_assembles_the_same_message(scripted: ScriptedModel) -> None:
    with served(Gateway(scripted)) as url, _client(url).chat.completions.stream(
            model="m", messages=FIRST, tools=[BASH]) as stream:
        final = stream.get_final_completion()
    message = final.choices[0].message
    assert message.content == "Looking."
    assert message.tool_calls[0].function.name == "bash"


def test_models_lists_the_one_model_served(scripted: ScriptedModel) -> None:
    with served(Gateway(scripted, model_name="harness-model")) as url:
        assert [m.id for m in _client(url).models.list()] == ["harness-model"]


def test_content_given_as_parts_and_developer_role_are_read() -> None:
    model = ScriptedModel([[{"type": "text", "text": "ok"}]])
    with served(Gateway(model)) as url:
        _client(url).chat.completions.create(model="m", messages=[
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}])
    assert [(m.role, m.text) for m in model.received[0]] == [("system", "Be brief."), ("user", "one\ntwo")]


def test_a_stop_sequence_cuts_the_answer_as_the_api_would() -> None:
    model = ScriptedModel([[{"type": "text", "text": "first part\nEND\nmore"}]])
    with served(Gateway(model)) as url:
        answer = _client(url).chat.completions.create(model="m", messages=FIRST, stop=["END"])
    assert (answer.choices[0].message.content, answer.choices[0].finish_reason) == ("first part\n", "stop")

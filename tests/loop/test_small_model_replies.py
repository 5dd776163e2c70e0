"""What a small real model sends, replayed: each reply below is one the local model (Gemma 3 270M behind
llama-cpp-python's server) sent in the benchmark sessions, shortened. Every malformed one is answered
with an error the model can act on, every session ends with a documented stop reason, and the
trajectory stays valid and resumable."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from loopworld import call, config, make_ctx, shelf, text
from test_loop_contract import START, assert_contract

from harness.agent.loop import EMPTY_REPLY, run_loop
from harness.agent.trajectory import TrajectoryWriter, load_trajectory
from harness.config import ToolsConfig
from harness.messages import Message
from harness.models.base import ModelResponse
from harness.models.openai import parse_response
from harness.models.react import ReActModel
from harness.models.scripted import ScriptedModel
from harness.tools.catalog import Catalog
from harness.tools.shell.bash import bash_tool


class RecordedServer:
    """Replays Chat Completions responses (as the server sent them) through the real OpenAI parser."""

    name = "recorded"

    def __init__(self, responses: Sequence[dict[str, Any]]) -> None:
        self._responses: Iterator[dict[str, Any]] = iter(responses)

    def respond(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelResponse:
        return parse_response(next(self._responses))


def _chat(content: str | None = None, calls: Sequence[tuple[str, str]] = (), finish: str = "stop") -> dict[str, Any]:
    tool_calls = [{"id": f"call__{i}_{name}_cmpl-1", "type": "function",
                   "function": {"name": name, "arguments": arguments}} for i, (name, arguments) in enumerate(calls)]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gemma3-270m",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else finish}],
            "usage": {"prompt_tokens": 1800, "completion_tokens": 12, "total_tokens": 1812}}


def _results(messages: Sequence[Message]) -> list[tuple[bool, str | None, str]]:
    return [(r.is_error, r.error_kind, r.content) for m in messages for r in m.tool_results]


def test_native_replies_of_a_small_model_each_get_an_actionable_answer(catalog, tmp_path: Path) -> None:
    model = RecordedServer([
        _chat(""),                                                  # an empty completion
        _chat(calls=[("read", '{"path": "list.txt"')]),             # arguments cut: not JSON
        _chat(calls=[("read", '{"file": "list.txt"}')]),            # JSON, wrong argument
        _chat(calls=[("run_tests", '{"command": "pytest"}')]),      # a tool that does not exist
        _chat(calls=[("read", '{"path": "list.txt"}')]),            # a good call
        _chat("The list has bread and milk."),                      # text: the end
    ])
    writer = TrajectoryWriter(tmp_path / "t.jsonl")
    writer.write_all(START)
    result = run_loop(model, catalog, make_ctx(), START, config(), trajectory=writer)
    assert (result.stop_reason, result.turns) == ("end", 6)
    assert result.messages[3].text == EMPTY_REPLY and "Call one of the tools" in EMPTY_REPLY
    parsing, schema, unknown, good = _results(result.messages)
    assert parsing[:2] == (True, "parsing") and "are not valid JSON" in parsing[2] and '{"path": ' in parsing[2]
    assert schema[:2] == (True, "validation") and "`path` is missing" in schema[2]
    assert 'A correct call: read({"path": "list.txt"})' in schema[2]
    assert unknown[:2] == (True, "unknown_tool")
    assert "no tool named 'run_tests'; the tools are: list, read" in unknown[2]
    assert good == (False, None, "bread, milk")
    assert_contract(result.messages)
    saved = load_trajectory(tmp_path / "t.jsonl")
    assert saved == result.messages                                  # valid, and all of it on disk
    idle = ScriptedModel([])
    again = run_loop(idle, catalog, make_ctx(), saved, config())    # resumable: a finished run asks nothing
    assert (again.stop_reason, idle.calls) == ("end", 0)


def test_empty_replies_over_and_over_stop_as_stuck_before_the_cap(catalog) -> None:
    result = run_loop(RecordedServer([_chat(None)] * 10), catalog, make_ctx(), START, config(max_turns=10))
    assert (result.stop_reason, result.turns) == ("stuck", 4)
    assert "sent an empty reply 4 times in a row" in result.final_text
    assert [m.role for m in result.messages[2:]] == ["assistant", "user"] * 4


def test_a_run_killed_after_an_empty_reply_resumes_with_the_nudge(catalog) -> None:
    killed = [*START, Message("assistant", ())]
    result = run_loop(ScriptedModel([[text("done: nothing to change")]]), catalog, make_ctx(), killed, config())
    assert result.stop_reason == "end" and result.messages[3].text == EMPTY_REPLY


def test_react_prose_without_an_action_gets_the_format_and_the_session_goes_on(catalog) -> None:
    replies = [
        "To fix the bug, I need to understand the code. To fix the bug, I need to understand the code.",
        'Thought: read it\nAction: read\nAction Input: {"path": "list.txt"}',
        "Thought: done\nFinal Answer: the list holds bread and milk",
    ]
    result = run_loop(ReActModel(ScriptedModel([[text(r)] for r in replies])), catalog, make_ctx(), START, config())
    assert (result.stop_reason, result.turns) == ("end", 3)
    prose, good = _results(result.messages)
    assert prose[:2] == (True, "parsing") and "neither an Action nor a `Final Answer:`" in prose[2]
    assert "Action Input: one JSON object" in prose[2]
    assert good == (False, None, "bread, milk")
    assert_contract(result.messages)


def test_react_reply_cut_after_a_complete_action_is_kept_and_run(catalog) -> None:
    repeating = 'Thought: read it\nAction: read\nAction Input: {"path": "list.txt"}\n' + "Thought: read it\n" * 40
    inner = ScriptedModel([{"content": [text(repeating)], "stop_reason": "max_tokens",
                            "usage": {"input_tokens": 900, "output_tokens": 512}},
                           [text("Final Answer: read")]])
    ctx = make_ctx()
    result = run_loop(ReActModel(inner), catalog, ctx, START, config())
    assert (result.stop_reason, result.turns) == ("end", 2)
    assert shelf(ctx).calls == {"read": 1} and result.usage.output_tokens == 512
    assert_contract(result.messages)


@pytest.mark.parametrize("cut", ["Category:\n  [Model]:\n    [`model`]:\n" * 20,
                                 'Thought: x\nAction: read\nAction Input: {"path": "list.t'])
def test_react_reply_cut_without_a_complete_action_stops_as_truncated(catalog, cut: str) -> None:
    inner = ScriptedModel([{"content": [text(cut)], "stop_reason": "max_tokens"}])
    result = run_loop(ReActModel(inner), catalog, make_ctx(), START, config())
    assert result.stop_reason == "truncated" and result.messages == START


def test_the_same_call_again_and_again_is_noted_then_stopped(catalog) -> None:
    same = [[call("list", folder="recipes/")]] * 6
    result = run_loop(ScriptedModel(same), catalog, make_ctx(), START, config(max_turns=6))
    assert result.stop_reason == "stuck"
    notes = [content for _, _, content in _results(result.messages)]
    assert ["made this exact call" in n for n in notes] == [False, True, True, True]


def test_bash_calls_with_the_timeouts_the_model_sent_are_refused_with_the_range(tmp_path: Path) -> None:
    catalog = Catalog([bash_tool(ToolsConfig())])      # validation comes first: nothing reaches a sandbox
    model = RecordedServer([
        _chat(calls=[("bash", '{"command": "python -m pytest -q tests/test_core.py", "timeout": 60000}')]),
        _chat(calls=[("bash", '{"command": "my_name.bash", "timeout": 1200000000000000}')]),
        _chat("I cannot run it."),
    ])
    result = run_loop(model, catalog, make_ctx(), START, config())
    first, second = _results(result.messages)
    for is_error, kind, content in (first, second):
        assert (is_error, kind) == (True, "validation")
        assert "`timeout`: got " in content and "expected a number <= 3600" in content
        assert content.endswith('A correct call: bash({"command": "python -m pytest -q", "timeout": 300})')
    assert "got 60000" in first[2] and "got 1200000000000000" in second[2]
    assert result.stop_reason == "end"

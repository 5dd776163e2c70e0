"""ReAct: the catalog as a Thought/Action/Observation text protocol (seed 004)."""

from __future__ import annotations

from harness.messages import Message, TextBlock, ToolResult, ToolUse, system, user
from harness.models.base import MALFORMED
from harness.models.react import ReActModel, parse_reply, render
from harness.models.scripted import ScriptedModel

TOOLS = [{"name": "bash", "description": "Run a shell command.",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]


def test_action_is_parsed_and_reply_is_cut_after_it() -> None:
    message = parse_reply('Thought: run the tests\nAction: bash\nAction Input: {"command": "pytest -q"}\n'
                          "Then I will read the failures.", "r-2")
    assert message.content == (TextBlock("Thought: run the tests"), ToolUse("r-2", "bash", {"command": "pytest -q"}))


def test_an_observation_the_model_writes_itself_is_not_believed() -> None:
    reply = ('Thought: check\nAction: bash\nAction Input: {"command": "pytest"}\n'
             "Observation: 4 passed\nThought: all good\nFinal Answer: fixed")
    message = parse_reply(reply, "r-2")
    assert message.tool_uses == [ToolUse("r-2", "bash", {"command": "pytest"})]
    assert "4 passed" not in str(message.to_dict()) and "Final Answer" not in message.text


def test_invented_observation_before_any_action_is_cut_too_and_the_format_asked_for() -> None:
    message = parse_reply("Thought: I ran it\nObservation: all tests pass\nFinal Answer: done", "r-2")
    assert message.text == "Thought: I ran it"
    [call] = message.tool_uses      # what is left has neither an Action nor a Final Answer
    assert call.input[MALFORMED]["raw"] == "Thought: I ran it"
    assert call.input[MALFORMED]["error"].startswith("your reply has neither an Action nor a `Final Answer:`")


def test_text_with_neither_action_nor_final_answer_gets_the_format_and_how_to_finish() -> None:
    message = parse_reply("To fix this I would run the tests. To fix this I would run the tests.", "r-6")
    [call] = message.tool_uses
    assert call.id == "r-6" and call.name == "?"
    error = call.input[MALFORMED]["error"]
    assert "Action: the name of one tool\nAction Input: one JSON object" in error
    assert "write `Final Answer:` and a short summary" in error


def test_an_empty_reply_is_left_to_the_loop() -> None:
    assert parse_reply("  \n", "r-8").content == (TextBlock(""),)


def test_no_action_is_the_final_answer() -> None:
    message = parse_reply("Thought: the fix is in\nFinal Answer: changed the regex", "r-4")
    assert message.tool_uses == [] and message.text.endswith("Final Answer: changed the regex")


def test_malformed_action_becomes_a_call_with_the_expected_format() -> None:
    message = parse_reply('Thought: x\nAction: bash\nAction Input: {"command": ', "r-2")
    [call] = message.tool_uses
    bad = call.input[MALFORMED]
    assert "is not valid JSON" in bad["error"]
    assert "Action Input: one JSON object with its arguments" in bad["error"]
    assert bad["raw"] == 'Action: bash\nAction Input: {"command":'
    missing = parse_reply("Action: bash", "r-3").tool_uses[0].input[MALFORMED]["error"]
    assert "has no `Action Input:` line" in missing


def test_transcript_renders_calls_and_observations_as_text() -> None:
    m = [system("Repair code."), user("Fix it."),
         Message("assistant", (TextBlock("Thought: look"), ToolUse("r-2", "bash", {"command": "ls"}))),
         Message("user", (ToolResult("r-2", "no such dir", is_error=True),))]
    out = render(m, TOOLS)
    assert [x.role for x in out] == ["system", "user", "assistant", "user"]
    assert out[0].text.startswith("Repair code.") and "- bash: Run a shell command." in out[0].text
    assert out[2].text == 'Thought: look\nAction: bash\nAction Input: {"command": "ls"}'
    assert out[3].text == "Observation (error):\nno such dir"
    assert all(isinstance(b, TextBlock) for x in out for b in x.content)


def test_react_model_sends_text_only_and_returns_native_calls() -> None:
    inner = ScriptedModel([[{"type": "text", "text": 'Thought: t\nAction: bash\nAction Input: {"command": "ls"}'}]])
    model = ReActModel(inner)
    response = model.respond([system("s"), user("u")], TOOLS)
    assert response.stop_reason == "tool_use"
    assert response.message.tool_uses == [ToolUse("react-2", "bash", {"command": "ls"})]
    assert model.name == "scripted+react"

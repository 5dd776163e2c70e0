"""Resuming a run from its trajectory, and the ReAct text protocol driving the same loop."""

from __future__ import annotations

from pathlib import Path

from loopworld import FILES, config, make_ctx, shelf, text
from test_loop_contract import LIST, SHOPPING, START, assert_contract

from harness.agent.loop import run_loop
from harness.agent.trajectory import TrajectoryWriter, load_trajectory
from harness.models.react import ReActModel
from harness.models.scripted import ScriptedModel


def test_run_resumed_from_its_trajectory_ends_like_an_uninterrupted_one(catalog, tmp_path: Path) -> None:
    whole = run_loop(ScriptedModel(SHOPPING), catalog, make_ctx(), START, config())
    path = tmp_path / "t.jsonl"
    writer = TrajectoryWriter(path)
    writer.write_all(START)
    first = run_loop(ScriptedModel(SHOPPING[:2]), catalog, make_ctx(), START, config(max_turns=2), trajectory=writer)
    assert first.stop_reason == "cap"
    saved = load_trajectory(path)
    assert saved == first.messages
    ctx = make_ctx()
    shelf(ctx).files["list.txt"] = "bread, milk"
    second = run_loop(ScriptedModel(SHOPPING[2:]), catalog, ctx, saved, config(),
                      trajectory=TrajectoryWriter(path, append=True))
    assert (second.stop_reason, second.turns) == ("end", 4)       # turns count across the resume
    assert second.messages == whole.messages
    assert load_trajectory(path) == whole.messages
    assert shelf(ctx).files["list.txt"] == LIST


def test_resume_answers_calls_left_unanswered_by_a_kill(catalog) -> None:
    full = run_loop(ScriptedModel(SHOPPING), catalog, make_ctx(), START, config())
    killed = full.messages[:7]            # the write was asked for; its result was never recorded
    assert killed[-1].role == "assistant" and killed[-1].tool_uses
    ctx = make_ctx()
    result = run_loop(ScriptedModel(SHOPPING[3:]), catalog, ctx, killed, config())
    assert result.stop_reason == "end" and shelf(ctx).files["list.txt"] == LIST
    assert result.messages == full.messages
    assert_contract(result.messages)


def test_resume_of_a_finished_run_asks_the_model_nothing(catalog) -> None:
    full = run_loop(ScriptedModel(SHOPPING), catalog, make_ctx(), START, config())
    idle = ScriptedModel([])
    again = run_loop(idle, catalog, make_ctx(), full.messages, config())
    assert (again.stop_reason, again.final_text, idle.calls) == ("end", full.final_text, 0)


def test_torn_last_line_of_a_killed_run_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    TrajectoryWriter(path).write_all(START)
    with path.open("a") as f:
        f.write('{"role": "assistant", "content": [{"type": "te')
    assert load_trajectory(path) == START


def test_react_model_drives_the_loop_past_a_bad_action_and_an_invented_observation(catalog) -> None:
    replies = [
        "Thought: read the list\nAction: read\nAction Input: {path: list.txt}",
        'Thought: quote the key\nAction: read\nAction Input: {"path": "list.txt"}\n'
        "Observation: eggs only\nFinal Answer: the list has eggs",
        "Thought: I have read it.\nFinal Answer: list.txt holds bread and milk.",
    ]
    inner = ScriptedModel([[text(r)] for r in replies])
    result = run_loop(ReActModel(inner), catalog, make_ctx(), START, config())
    bad = result.messages[3].tool_results[0]
    assert bad.is_error and "is not valid JSON" in bad.content and "Action Input: one JSON object" in bad.content
    good = result.messages[5].tool_results[0]
    assert (good.is_error, good.content) == (False, FILES["list.txt"])       # the real file, not "eggs only"
    assert result.stop_reason == "end" and result.final_text.endswith("list.txt holds bread and milk.")
    last_prompt = inner.received[-1]
    assert all(b.type == "text" for m in last_prompt for b in m.content)   # text only, no native tools
    assert "Observation:\nbread, milk" in last_prompt[-1].text
    assert "eggs only" not in "".join(m.text for m in last_prompt)
    assert_contract(result.messages)


def test_react_unknown_tool_gets_the_catalog_listing(catalog) -> None:
    inner = ScriptedModel([[text('Action: cat\nAction Input: {"path": "list.txt"}')], [text("Final Answer: ok")]])
    result = run_loop(ReActModel(inner), catalog, make_ctx(), START, config())
    observation = result.messages[3].tool_results[0]
    assert observation.is_error
    assert "there is no tool named 'cat'; the tools are: list, read, write" in observation.content
    assert result.stop_reason == "end"

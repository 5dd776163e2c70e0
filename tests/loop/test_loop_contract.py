"""The loop contract of seed 001: three ways to stop, and the invariants, with scripted models."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from loopworld import call, config, shelf, text

from harness.agent.loop import AgentLoop, run_loop
from harness.agent.trajectory import TrajectoryWriter, load_trajectory
from harness.messages import Message, system, user
from harness.models.base import MALFORMED
from harness.models.scripted import ScriptedModel

START = [system("You work on the user's files with your tools."), user("Add to list.txt what the recipes need.")]
LIST = "bread, milk, tomatoes, cucumber, eggs"
SHOPPING = [
    [text("Which recipes are there?"), call("list", folder="recipes/")],
    [call("read", path="recipes/gazpacho.txt"), call("read", path="recipes/omelette.txt"),
     call("read", path="list.txt")],
    [call("write", path="list.txt", content=LIST)],
    [text("I added tomatoes, cucumber and eggs to list.txt.")],
]


def assert_contract(messages: Sequence[Message]) -> None:
    """Every tool_use is answered, in order and by id, in the very next message."""
    for i, m in enumerate(messages):
        if m.role == "assistant" and m.tool_uses:
            nxt = messages[i + 1]
            assert nxt.role == "user"
            assert [r.tool_use_id for r in nxt.tool_results] == [c.id for c in m.tool_uses]


def test_normal_end_after_four_turns_the_model_decides(catalog, ctx, tmp_path: Path) -> None:
    model = ScriptedModel(SHOPPING)
    writer = TrajectoryWriter(tmp_path / "t.jsonl")
    writer.write_all(START)
    result = run_loop(model, catalog, ctx, START, config(), trajectory=writer)
    assert (result.stop_reason, result.turns, result.finished) == ("end", 4, True)
    assert result.final_text == "I added tomatoes, cucumber and eggs to list.txt."
    assert shelf(ctx).files["list.txt"] == LIST
    assert [len(seen) for seen in model.received] == [2, 4, 6, 8]
    assert len(result.messages) == 9
    assert_contract(result.messages)


def test_model_sees_only_m_and_m_only_grows(catalog, ctx) -> None:
    model = ScriptedModel(SHOPPING)
    result = run_loop(model, catalog, ctx, START, config())
    for seen in model.received:   # every call got a prefix of the final M, nothing else
        assert seen == result.messages[: len(seen)]


def test_cap_answers_the_last_turns_calls_and_says_the_agent_did_not_finish(catalog, ctx) -> None:
    result = run_loop(ScriptedModel(SHOPPING), catalog, ctx, START, config(max_turns=3))
    assert (result.stop_reason, result.turns, result.finished) == ("cap", 3, False)
    assert "turn limit (3) was reached before the agent finished" in result.final_text
    assert result.messages[-1].role == "user" and result.messages[-1].tool_results[0].content.startswith("wrote")
    assert shelf(ctx).files["list.txt"] == LIST       # what the calls changed stays changed
    assert_contract(result.messages)


def test_stubborn_model_repeating_the_same_call_is_told_so_then_stopped_as_stuck(catalog, ctx) -> None:
    stubborn = ScriptedModel([[call("list", folder="recipes/")] for _ in range(12)])
    result = run_loop(stubborn, catalog, ctx, START, config(max_turns=10))
    assert (result.stop_reason, result.turns) == ("stuck", 4)      # loop.max_repeats = 4
    assert "sent the same call(s) 4 times in a row (loop.max_repeats 4)" in result.final_text
    assert shelf(ctx).calls == {"list": 4} and stubborn.turns_left == 8
    first, second = result.messages[3].tool_results[0], result.messages[5].tool_results[0]
    assert "exact call" not in first.content
    assert second.content.endswith("you have now made this exact call 2 times in a row, and repeating it will "
                                   "not change its result. Do something else: another command, another file, "
                                   "or an edit.")
    assert_contract(result.messages)


def test_stubborn_model_is_stopped_by_the_cap_when_it_comes_first(catalog, ctx) -> None:
    stubborn = ScriptedModel([[call("list", folder="recipes/")] for _ in range(12)])
    result = run_loop(stubborn, catalog, ctx, START, config(max_turns=3))
    assert (result.stop_reason, result.turns) == ("cap", 3)
    assert shelf(ctx).calls == {"list": 3}
    assert_contract(result.messages)


def test_truncated_response_is_neither_run_nor_taken_as_the_end(catalog, ctx) -> None:
    model = ScriptedModel([SHOPPING[0], {"content": [call("write", path="list.txt", content="bre")],
                                         "stop_reason": "max_tokens"}])
    result = run_loop(model, catalog, ctx, START, config())
    assert result.stop_reason == "truncated" and "cut by max_tokens" in result.final_text
    assert shelf(ctx).files["list.txt"] == "bread, milk"      # the cut write never ran
    assert shelf(ctx).calls == {"list": 1}
    assert len(result.messages) == 4 and result.messages[-1].role == "user"   # not added to M
    assert_contract(result.messages)


def test_malformed_tool_calls_become_error_observations_and_the_model_recovers(catalog, ctx) -> None:
    model = ScriptedModel([
        [call("read", file="list.txt"), call("reed", path="list.txt"),
         {"type": "tool_use", "name": "read", "input": {MALFORMED: {"error": "not JSON; send an object", "raw": "{"}}}],
        [call("read", path="list.txt")],
        [text("list.txt holds bread and milk.")]])
    result = run_loop(model, catalog, ctx, START, config())
    wrong_arg, unknown, bad_json = result.messages[3].tool_results
    assert wrong_arg.is_error and "`path` is missing" in wrong_arg.content
    assert "`file`: not an argument" in wrong_arg.content
    assert 'A correct call: read({"path": "list.txt"})' in wrong_arg.content
    assert unknown.is_error and "there is no tool named 'reed'" in unknown.content
    assert bad_json.is_error and bad_json.content == "not JSON; send an object"
    assert [r.error_kind for r in (wrong_arg, unknown, bad_json)] == ["validation", "unknown_tool", "parsing"]
    fixed = result.messages[5].tool_results[0]
    assert (fixed.is_error, fixed.content, fixed.error_kind) == (False, "bread, milk", None)   # positive control
    assert shelf(ctx).calls == {"read": 1}
    assert result.stop_reason == "end"


def test_history_window_shortens_what_is_sent_but_not_the_trajectory(catalog, ctx, tmp_path: Path) -> None:
    model = ScriptedModel(SHOPPING)
    writer = TrajectoryWriter(tmp_path / "t.jsonl")
    writer.write_all(START)
    result = run_loop(model, catalog, ctx, START, config(keep=1), trajectory=writer)
    last_sent = model.received[-1]
    assert last_sent[3].tool_results[0].content != result.messages[3].tool_results[0].content
    assert result.messages[3].tool_results[0].content == "recipes/gazpacho.txt\nrecipes/omelette.txt"
    assert load_trajectory(tmp_path / "t.jsonl") == result.messages
    assert_contract(last_sent)


def test_trajectory_is_written_after_every_step(catalog, ctx, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    writer = TrajectoryWriter(path)
    writer.write_all(START)
    lines_at_each_call: list[int] = []

    class Watching(ScriptedModel):
        def respond(self, messages, tools):  # type: ignore[no-untyped-def]
            lines_at_each_call.append(len(path.read_text().splitlines()))
            return super().respond(messages, tools)

    run_loop(Watching(SHOPPING), catalog, ctx, START, config(), trajectory=writer)
    assert lines_at_each_call == [2, 4, 6, 8]
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(lines) == 9 and lines[2]["meta"]["turn"] == 1 and lines[3]["meta"]["tools"][0]["name"] == "list"


def test_script_running_out_stops_the_run_as_an_error(catalog, ctx) -> None:
    result = run_loop(ScriptedModel(SHOPPING[:1]), catalog, ctx, START, config())
    assert result.stop_reason == "error" and "has 1 turn(s) and was asked for turn 2" in result.final_text


def test_harness_failure_in_a_tool_stops_the_run_and_still_answers_every_call(catalog, ctx) -> None:
    model = ScriptedModel([[call("explode"), call("write", path="list.txt", content="x")]])
    result = run_loop(model, catalog, ctx, START, config())
    assert result.stop_reason == "error" and "the sandbox channel died" in result.final_text
    first, second = result.messages[-1].tool_results
    assert first.is_error and "the harness failed: HarnessError: the sandbox channel died" in first.content
    assert second.is_error and second.content.startswith("not run:")
    assert (first.error_kind, second.error_kind) == ("harness", "harness")
    assert shelf(ctx).files["list.txt"] == "bread, milk"
    assert_contract(result.messages)


def test_token_budget_stops_before_the_next_call(catalog, ctx) -> None:
    heavy = [{"content": t, "usage": {"input_tokens": 600, "output_tokens": 50}} for t in SHOPPING]
    result = run_loop(ScriptedModel(heavy), catalog, ctx, START, config(max_total_tokens=1000))
    assert result.stop_reason == "budget"
    assert "token budget spent: 1300 >= loop.max_total_tokens 1000" in result.final_text
    assert result.turns == 2 and result.usage.input_tokens == 1200
    assert_contract(result.messages)


def test_cost_is_computed_from_the_price_table(catalog, ctx) -> None:
    priced = [{"content": t, "usage": {"input_tokens": 1_000_000, "output_tokens": 100_000}} for t in SHOPPING]
    cfg = config()
    cfg = cfg.replace(model=dataclasses.replace(cfg.model, prices={"scripted": [3.0, 15.0]}))
    result = AgentLoop(ScriptedModel(priced), catalog, ctx, cfg).run(START)
    assert result.cost_usd == 4 * (3.0 + 1.5)
    assert run_loop(ScriptedModel(SHOPPING), catalog, ctx, START, config()).cost_usd is None


def test_time_budget_stops_before_the_next_call(catalog, ctx) -> None:
    model = ScriptedModel(SHOPPING)
    result = run_loop(model, catalog, ctx, START, config(max_wall_seconds=1e-9))
    assert result.stop_reason == "budget" and "time budget spent" in result.final_text
    assert (result.turns, model.calls) == (0, 0)
    generous = run_loop(ScriptedModel(SHOPPING), catalog, ctx, START, config(max_wall_seconds=600))
    assert generous.stop_reason == "end"                                  # positive control

"""The scripted model: the one fake model, shipped in the package."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ConfigError, ModelTruncated, ScriptExhausted
from harness.messages import ToolUse, user
from harness.models.scripted import ScriptedModel, resolve_script


def test_replays_turns_in_order_and_assigns_missing_ids(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"turns": [
        [{"type": "text", "text": "look"}, {"type": "tool_use", "name": "bash", "input": {"command": "ls"}},
         {"type": "tool_use", "id": "mine", "name": "bash", "input": {"command": "pwd"}}],
        [{"type": "text", "text": "done"}]]}))
    model = ScriptedModel.from_file(path)
    first = model.respond([user("go")], [])
    assert first.stop_reason == "tool_use"
    assert first.message.tool_uses == [ToolUse("call-1-2", "bash", {"command": "ls"}),
                                       ToolUse("mine", "bash", {"command": "pwd"})]
    second = model.respond([user("go")], [])
    assert (second.stop_reason, second.message.text) == ("end_turn", "done")
    assert model.name == f"scripted:{path}"


def test_running_out_of_turns_says_so() -> None:
    model = ScriptedModel([[{"type": "text", "text": "only one"}]], source="one.json")
    model.respond([user("go")], [])
    with pytest.raises(ScriptExhausted, match=r"one.json has 1 turn\(s\) and was asked for turn 2"):
        model.respond([user("go")], [])


def test_a_turn_marked_max_tokens_raises_truncated() -> None:
    model = ScriptedModel([{"content": [{"type": "text", "text": "half a thou"}], "stop_reason": "max_tokens"}])
    with pytest.raises(ModelTruncated, match="half a thou"):
        model.respond([user("go")], [])


def test_malformed_block_is_rejected_with_an_example() -> None:
    with pytest.raises(ConfigError, match=r'turn 1 of <script>, block 1: .* is not a text or tool_use block; '
                                          r'expected \{"type": "text"'):
        ScriptedModel([[{"type": "tool_use", "input": {}}]])
    ScriptedModel([[{"type": "tool_use", "name": "bash", "input": {}}]])   # positive control


def test_shipped_demo_script_is_found_by_name() -> None:
    path = resolve_script("wordcount-fix")
    assert path.name == "wordcount-fix.json" and path.is_file()
    with pytest.raises(ConfigError, match="'no-such-script' not found"):
        resolve_script("no-such-script")

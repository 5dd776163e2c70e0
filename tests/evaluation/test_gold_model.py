"""The gold model's turns: view the files its patch changes, apply the patch, end."""

from __future__ import annotations

import pytest

from harness.errors import ModelError
from harness.messages import Message, ToolResult, user
from harness.models.gold import EmptyModel, GoldModel

from .conftest import TASKS

TOOLS = [{"name": "view"}, {"name": "apply_patch"}, {"name": "bash"}]


def test_gold_model_views_then_applies_then_ends():
    patch = (TASKS / "durations" / "gold.patch").read_text()
    model = GoldModel(patch)
    history = [user("fix it")]
    first = model.respond(history, TOOLS)
    assert [(u.name, u.input) for u in first.message.tool_uses] == [
        ("view", {"path": "durations/formatting.py"}), ("view", {"path": "durations/parsing.py"})]
    history += [first.message, Message("user", tuple(ToolResult(u.id, "ok") for u in first.message.tool_uses))]
    second = model.respond(history, TOOLS)
    assert [u.name for u in second.message.tool_uses] == ["apply_patch"]
    assert second.message.tool_uses[0].input == {"patch": patch}
    history += [second.message, Message("user", (ToolResult("gold-apply", "applied"),))]
    third = model.respond(history, TOOLS)
    assert third.stop_reason == "end_turn" and third.message.text == "Applied the reference patch."


def test_gold_model_reports_a_refused_patch_and_needs_its_tools():
    model = GoldModel((TASKS / "cart" / "gold.patch").read_text())
    history = [user("fix"), Message("assistant", ()), Message("user", ()),
               model.respond([user("fix"), Message("assistant", ())], TOOLS).message,
               Message("user", (ToolResult("gold-apply", "hunk 1 does not match", is_error=True),))]
    assert "could not be applied:\nhunk 1 does not match" in model.respond(history, TOOLS).message.text
    with pytest.raises(ModelError, match="needs the 'apply_patch' tool and the catalog has \\['view'\\]"):
        model.respond([user("fix")], [{"name": "view"}])


def test_empty_model_ends_at_once():
    answer = EmptyModel().respond([user("fix")], TOOLS)
    assert answer.stop_reason == "end_turn" and not answer.message.tool_uses

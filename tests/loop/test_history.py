"""The history window keeps the last N observations whole and summarises older ones."""

from __future__ import annotations

import pytest

from harness.agent.history import apply_window
from harness.messages import Message, TextBlock, ToolResult, ToolUse


def _conversation(n: int) -> list[Message]:
    messages = [Message("user", (TextBlock("fix the bug"),))]
    for i in range(n):
        messages.append(Message("assistant", (ToolUse(f"t{i}", "view", {"path": f"f{i}.py"}),)))
        messages.append(Message("user", (ToolResult(f"t{i}", f"output {i}\n" * 30, is_error=(i == 0)),)))
    return messages


def _results(messages: list[Message]) -> list[ToolResult]:
    return [b for m in messages for b in m.content if isinstance(b, ToolResult)]


def test_only_the_last_five_observations_stay_whole() -> None:
    original = _conversation(8)
    results = _results(apply_window(original, 5))
    assert [r.content.startswith("[older observation") for r in results] == [True] * 3 + [False] * 5
    assert results[0].content == ('[older observation removed from the context: view(path="f0.py") failed; '
                                  "its output had 31 line(s), 270 characters. Repeat the call if you need it "
                                  "again.]")
    assert results[0].is_error and results[0].tool_use_id == "t0"
    assert "succeeded" in results[1].content
    assert _results(original)[0].content.startswith("output 0")   # the trajectory keeps everything


def test_window_larger_than_history_changes_nothing() -> None:
    original = _conversation(3)
    assert apply_window(original, 5) == original


def test_window_zero_summarises_all_and_negative_is_refused() -> None:
    assert all(r.content.startswith("[older observation") for r in _results(apply_window(_conversation(2), 0)))
    with pytest.raises(ValueError, match="keep must be >= 0"):
        apply_window(_conversation(2), -1)

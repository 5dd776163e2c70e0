"""A tool result's error kind is written into the trajectory and read back; older lines have none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.agent.trajectory import TrajectoryWriter, load_trajectory
from harness.messages import TOOL_ERROR_KINDS, Message, ToolResult


def test_error_kinds_survive_the_trajectory(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    results = tuple(ToolResult(f"toolu_{n}", f"refused ({kind})", is_error=True, error_kind=kind)
                    for n, kind in enumerate(TOOL_ERROR_KINDS))
    message = Message("user", results + (ToolResult("toolu_ok", "done"),))
    TrajectoryWriter(path).write(message)
    assert load_trajectory(path) == [message]
    line = json.loads(path.read_text())
    assert line["content"][0]["error_kind"] == "parsing" and "error_kind" not in line["content"][-1]


def test_a_trajectory_written_before_kinds_existed_reads_with_no_kind(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "anchor not found", "is_error": True},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "x", "is_error": True,
         "error_kind": "a kind no longer known"}]}) + "\n")
    (first, second) = load_trajectory(path)[0].tool_results
    assert first.is_error and first.error_kind is None and second.error_kind is None


def test_a_kind_on_a_result_that_is_not_an_error_is_refused() -> None:
    with pytest.raises(ValueError, match="must have is_error=True"):
        ToolResult("toolu_1", "ok", error_kind="edit")

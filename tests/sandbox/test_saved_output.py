"""An output the observation cuts is always saved in full, even when it is smaller than the in-memory head."""

from __future__ import annotations

import re

from harness.config import ToolsConfig
from harness.tools.shell.bash import budget_of, run_command


def test_output_cut_by_line_budget_is_saved_in_full_and_pageable(sandbox) -> None:
    result, observation = run_command(sandbox, "seq 1 300", 30, budget_of(ToolsConfig()))
    assert result.stdout.total_bytes < 32768 and not result.stdout.truncated   # all of it was in the head
    match = re.search(r"the full output is saved at (\S+?):", observation)
    assert match, observation
    saved = sandbox.read_file(match.group(1)).data.decode()
    assert saved.splitlines() == [str(i) for i in range(1, 301)]


def test_output_within_budget_is_shown_whole_and_not_saved(sandbox) -> None:
    result, observation = run_command(sandbox, "seq 1 10", 30, budget_of(ToolsConfig()))
    assert result.stdout.saved_path is None
    assert observation.splitlines()[1:] == [str(i) for i in range(1, 11)]
    assert "omitted" not in observation

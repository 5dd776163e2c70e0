"""A third-party agent inside the sandbox, its model calls through the host's gateway (real Docker, real
agents installed offline into the image, real HTTP from inside to the host; the model is scripted or a
fake OpenAI-compatible server on the host)."""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.agent import external
from harness.agent.external import run_external_session
from harness.config import Config
from harness.core.task import load_task
from harness.external import parse_agent
from harness.models.openai import OpenAIModel
from harness.models.scripted import ScriptedModel
from tests.gateway_echo import send_json

REPO_ROOT = Path(__file__).resolve().parents[2]
WORDCOUNT = REPO_ROOT / "tasks" / "wordcount"
SCRIPTS = REPO_ROOT / "harness" / "data" / "scripts"
CANARY = "sk-canary-7f3e9a1c5b2d4e6f8a0b"


def _config(**loop: object) -> Config:
    config = Config()
    return config.replace(loop=dataclasses.replace(config.loop, **loop))   # type: ignore[arg-type]


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run(agent: str, model: object, tmp_path: Path, **loop: object):  # type: ignore[no-untyped-def]
    return run_external_session(load_task(WORDCOUNT), parse_agent(agent), model, _config(**loop),  # type: ignore[arg-type]
                                tmp_path / "run", labels={"harness.test": "1"})


def test_the_tiny_agent_repairs_the_task_through_the_gateway(tmp_path: Path) -> None:
    outcome = _run("tiny", ScriptedModel.from_file(SCRIPTS / "wordcount-bash.json"), tmp_path)
    run = tmp_path / "run"
    assert outcome.stop_reason == "end", (run / "agent.log").read_text()
    assert outcome.tests_passed is True
    assert "ranked[:n]" in outcome.patch and "wordcount/core.py" in outcome.patch
    assert outcome.turns == 4
    calls = [r for r in _lines(run / "calls.jsonl") if r.get("status") == 200]
    assert len(calls) == 4
    trajectory = _lines(run / "trajectory.jsonl")
    assert trajectory[0]["role"] == "user" and "wordcount" in json.dumps(trajectory[0])
    assert [m["role"] for m in trajectory].count("assistant") == 4       # the whole conversation, step by step
    result = json.loads((run / "result.json").read_text())
    assert result["agent"] == "tiny" and result["stop_reason"] == "end" and result["tests_passed"] is True
    assert "tests/test_core.py" in (run / "tests.txt").read_text()


def test_mini_swe_agent_runs_unchanged_inside_the_sandbox(tmp_path: Path) -> None:
    outcome = _run("mini-swe-agent", ScriptedModel.from_file(SCRIPTS / "wordcount-mini.json"), tmp_path)
    log = (tmp_path / "run" / "agent.log").read_text()
    assert outcome.stop_reason == "end", log
    assert outcome.tests_passed is True, log
    assert outcome.turns == 4


def test_aider_runs_inside_the_sandbox(tmp_path: Path) -> None:
    outcome = _run("aider", ScriptedModel.from_file(SCRIPTS / "wordcount-aider.json"), tmp_path)
    log = (tmp_path / "run" / "agent.log").read_text()
    assert outcome.tests_passed is True, log
    assert ".aider" not in outcome.patch, outcome.patch      # its caches and histories stay out of the patch


class _FakeOpenAI(BaseHTTPRequestHandler):
    """An OpenAI-compatible server on the host: answers every call with one bash call, then text."""

    seen: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - the standard library's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(self.headers.get("Authorization", ""))
        first = sum(1 for m in body["messages"] if m["role"] == "tool") == 0
        # the pattern matches the key but not itself, so the probe's own command line is not counted
        pattern = f"'{CANARY[:8]}[{CANARY[8]}]{CANARY[9:]}'"
        probe = (f"env | grep -c {pattern}; grep -rl --exclude-dir=proc --exclude-dir=sys {pattern} / 2>/dev/null"
                 f" | head; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | "
                 f"grep -c {pattern}; ps -eo args | grep -c {pattern}; echo PRO''BED")
        message = ({"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": probe})}}]}
            if first else {"role": "assistant", "content": "done"})
        answer = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                             "choices": [{"index": 0, "message": message,
                                          "finish_reason": "tool_calls" if first else "stop"}],
                             "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110,
                                       "prompt_tokens_details": {"cached_tokens": 40}}}).encode()
        send_json(self, answer)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def fake_openai() -> Iterator[str]:
    _FakeOpenAI.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_the_real_key_stays_on_the_host(tmp_path: Path, fake_openai: str) -> None:
    """The backend gets the operator's key; the sandbox's environment, files and processes never hold it."""
    config = Config()
    model = OpenAIModel("gpt-fake", api_key=CANARY, config=config.model, max_tokens=1000, base_url=fake_openai)
    priced = dataclasses.replace(config.model, spec="openai:gpt-fake", prices={"openai:gpt-fake": [1, 2, 0.1, 1]})
    outcome = run_external_session(load_task(WORDCOUNT), parse_agent("tiny"), model, config.replace(model=priced),
                                   tmp_path / "run", labels={"harness.test": "1"})
    log = (tmp_path / "run" / "agent.log").read_text()
    assert "PROBED" in log, log
    lines = log.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("$ env | grep"))
    counts = lines[start + 1:lines.index("PROBED")]
    assert [line.strip() for line in counts if line.strip()] == ["0", "0", "0"], log
    assert _FakeOpenAI.seen and all(seen == f"Bearer {CANARY}" for seen in _FakeOpenAI.seen)
    assert outcome.usage.input_tokens == 120 and outcome.usage.cache_read_tokens == 80
    assert outcome.cost_usd == pytest.approx((120 * 1 + 20 * 2 + 80 * 0.1) / 1e6)


def test_anything_else_the_agent_sends_fails_at_once_saying_why(tmp_path: Path) -> None:
    tries = ("t0=$(date +%s); pip download --no-deps six -d /tmp/x 2>&1; "
             "git ls-remote https://github.com/psf/requests 2>&1; "
             "python3 -c 'import urllib.request as u; u.urlopen(\"http://pypi.org/simple/\")' 2>&1 | tail -1; "
             "echo ELAPSED $(( $(date +%s) - t0 ))")
    script = {"turns": [[{"type": "tool_use", "name": "bash", "input": {"command": tries}}],
                        [{"type": "text", "text": "done"}]]}
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    _run("tiny", ScriptedModel.from_file(path), tmp_path)
    log = (tmp_path / "run" / "agent.log").read_text()
    elapsed = int(log.rsplit("ELAPSED ", 1)[1].split()[0])
    assert elapsed <= 20, log
    assert log.count("the sandbox has no network") >= 2, log    # pip and urllib print the refusal's reason
    refused = [r for r in _lines(tmp_path / "run" / "calls.jsonl") if r.get("status") == 403]
    assert len(refused) >= 3, refused


_STUBBORN = textwrap.dedent("""
    import json, os, urllib.request as u
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    for _ in range(10):
        try:
            u.urlopen(u.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
                                headers={"Content-Type": "application/json"}))
            print("answered")
        except Exception as exc:
            print("refused", exc)
""")


def test_a_spent_budget_stops_the_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After max_turns calls the next is refused; an agent that goes on regardless is ended from outside."""
    monkeypatch.setattr(external, "GRACE_SECONDS", 2.0)
    turn = [{"type": "tool_use", "name": "bash", "input": {"command": "echo working"}}]
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": [turn] * 10}))
    stubborn = f"cmd:python3 -c {shlex.quote(_STUBBORN)}; sleep 300"
    outcome = _run(stubborn, ScriptedModel.from_file(path), tmp_path, max_turns=2)
    assert outcome.stop_reason == "budget"
    assert outcome.turns == 2
    assert "ended" in outcome.final_text


def test_harness_run_and_eval_take_an_agent(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "harness.cli.main", "run", str(WORDCOUNT), "--agent", "tiny",
                          "--model", f"scripted:{SCRIPTS / 'wordcount-bash.json'}", "--out", str(tmp_path / "r"),
                          "--json"], capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout)["agent"] == "tiny"
    evaluation = subprocess.run([sys.executable, "-m", "harness.cli.main", "eval", str(WORDCOUNT), "--agent", "tiny",
                                 "--model", f"scripted:{SCRIPTS / 'wordcount-bash.json'}", "--out",
                                 str(tmp_path / "e"), "--json"], capture_output=True, text=True, timeout=900,
                                cwd=tmp_path)
    assert evaluation.returncode == 0, evaluation.stderr[-3000:]
    report = json.loads(evaluation.stdout)
    assert report["resolved_instances"] == 1, report

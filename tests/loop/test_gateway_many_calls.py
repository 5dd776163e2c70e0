"""A 1,000-call session through the model gateway loses no call and no byte (real Docker, the real relay,
the real OpenAI adapter, an echo server on the host standing in for the provider).

Each call's text is random (1 to 4,096 characters of ASCII, quotes, backslashes, markup, tabs, accents,
CJK, emoji, U+2028): the provider must receive every one, in order, exactly as the agent sent it; the
agent must read back exactly what the provider answered; calls.jsonl must hold every call with its
message and answer.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from harness.agent.external import run_external_session
from harness.config import Config
from harness.core.task import load_task
from harness.external import parse_agent
from harness.models.openai import OpenAIModel
from tests.gateway_echo import chain, client_agent, echo_server, sha

REPO_ROOT = Path(__file__).resolve().parents[2]
CALLS = 1000


def _done_line(log: str) -> list[str]:
    done = [line.split() for line in log.splitlines() if line.startswith("DONE ")]
    assert len(done) == 1, log[-3000:]
    return done[0]


def test_a_thousand_calls_through_the_gateway_lose_no_call_and_no_byte(tmp_path: Path) -> None:
    config = Config()
    config = config.replace(loop=dataclasses.replace(config.loop, max_turns=CALLS + 10))
    with echo_server() as server:
        model = OpenAIModel("echo", api_key="k", config=config.model, max_tokens=1000, base_url=server.url)
        run_external_session(load_task(REPO_ROOT / "tasks" / "wordcount"), parse_agent(client_agent(CALLS)), model,
                             config, tmp_path / "run", labels={"harness.test": "1"})
        received = list(server.received)
    log = (tmp_path / "run" / "agent.log").read_text()
    _, calls, mismatches, agent_chain, *_ = _done_line(log)
    assert (int(calls), int(mismatches)) == (CALLS, 0), log[-3000:]
    assert "MISMATCH" not in log
    assert len(received) == CALLS                                   # no call lost, none repeated
    assert chain(received) == agent_chain                           # every byte, in order, at the provider
    records = [json.loads(line) for line in (tmp_path / "run" / "calls.jsonl").read_text().splitlines()]
    answered = [r for r in records if r["route"].endswith("/chat/completions")]
    assert len(answered) == CALLS and all(r["status"] == 200 for r in answered)
    sent = [sha(r["messages"][-1]["content"][0]["text"]) for r in answered]
    replies = [sha(r["response"]["content"][0]["text"]) for r in answered]
    assert sent == received and replies == received                 # the record holds each call whole


def test_the_check_sees_one_changed_character(tmp_path: Path) -> None:
    """Control: a provider that changes one character of one answer is caught by the client and the record."""
    config = Config()
    with echo_server(alter_call=2) as server:
        model = OpenAIModel("echo", api_key="k", config=config.model, max_tokens=1000, base_url=server.url)
        run_external_session(load_task(REPO_ROOT / "tasks" / "wordcount"), parse_agent(client_agent(5)), model,
                             config, tmp_path / "run", labels={"harness.test": "1"})
        received = list(server.received)
    log = (tmp_path / "run" / "agent.log").read_text()
    assert _done_line(log)[1:3] == ["5", "1"], log[-3000:]
    assert "MISMATCH 2 " in log
    records = [json.loads(line) for line in (tmp_path / "run" / "calls.jsonl").read_text().splitlines()]
    replies = [sha(r["response"]["content"][0]["text"]) for r in records if r["status"] == 200]
    assert len(replies) == 5 and replies != received and replies[:2] == received[:2]

"""A third-party agent's trajectory.jsonl: the conversation the gateway last saw, each reply with its call's
turn, stop reason and usage, as our loop writes them (real gateway, scripted model; no sandbox needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.agent.external import write_trajectory
from harness.gateway import Gateway
from harness.models.scripted import ScriptedModel
from sandbox.loopback import HttpRequest

USAGE = [{"input_tokens": 100 * n, "output_tokens": n, "cache_read_tokens": 10 * n} for n in (1, 2, 3)]


def _gateway() -> Gateway:
    return Gateway(ScriptedModel([{"content": [{"type": "text", "text": f"reply {n}"}], "usage": u}
                                  for n, u in enumerate(USAGE, 1)]))


def _ask(gateway: Gateway, messages: list[dict[str, Any]]) -> str:
    body = json.dumps({"model": "m", "messages": messages}).encode()
    answer = gateway.handle(HttpRequest("POST", "/v1/chat/completions", (), body))
    assert answer.status == 200, answer.body
    return str(json.loads(answer.body)["choices"][0]["message"]["content"])


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_reply_of_a_resent_history_gets_its_calls_turn_and_usage(tmp_path: Path) -> None:
    gateway, history = _gateway(), [{"role": "user", "content": "fix it"}]
    for _ in USAGE:                                  # an agent that resends its whole history each call
        history += [{"role": "assistant", "content": _ask(gateway, history)}, {"role": "user", "content": "go on"}]
    write_trajectory(tmp_path / "trajectory.jsonl", gateway)
    lines = _lines(tmp_path / "trajectory.jsonl")
    replies = [line for line in lines if line["role"] == "assistant"]
    assert [r["content"][0]["text"] for r in replies] == ["reply 1", "reply 2", "reply 3"]
    assert [r["meta"]["turn"] for r in replies] == [1, 2, 3]
    assert [r["meta"]["usage"]["input_tokens"] for r in replies] == [100, 200, 300]
    assert all(r["meta"]["stop_reason"] == "end_turn" for r in replies)
    assert all("meta" not in line for line in lines if line["role"] != "assistant")


def test_a_trimmed_history_gives_only_the_last_reply_its_calls_figures(tmp_path: Path) -> None:
    gateway = _gateway()
    for n in range(3):                               # an agent that sends only the latest exchange
        _ask(gateway, [{"role": "user", "content": f"step {n}"}])
    write_trajectory(tmp_path / "trajectory.jsonl", gateway)
    lines = _lines(tmp_path / "trajectory.jsonl")
    assert [line["role"] for line in lines] == ["user", "assistant"]
    assert lines[1]["meta"] == {"turn": 3, "stop_reason": "end_turn", "usage": {
        "input_tokens": 300, "output_tokens": 3, "cache_read_tokens": 30, "cache_write_tokens": 0}}

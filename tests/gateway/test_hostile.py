"""Hostile requests: the gateway never raises, answers 400 in the provider's shape, quotes nothing raw,
and still serves the next good call."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import pytest

from harness.gateway import Gateway
from harness.messages import Message, TextBlock
from harness.models import ModelResponse
from sandbox.loopback import HttpRequest

GOOD_OPENAI = {"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
                                          {"role": "assistant", "content": None, "tool_calls": [
                                              {"id": "c1", "type": "function",
                                               "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
                                          {"role": "tool", "tool_call_id": "c1", "content": "x"}],
               "tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}],
               "stream": False, "max_tokens": 10, "stop": ["END"]}
GOOD_ANTHROPIC = {"model": "m", "max_tokens": 10, "system": [{"type": "text", "text": "s"}],
                  "messages": [{"role": "user", "content": "hi"},
                               {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash",
                                                                  "input": {"command": "ls"}}]},
                               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                             "content": "x"}]}],
                  "tools": [{"name": "bash", "input_schema": {"type": "object"}}], "stop_sequences": ["END"]}
ANSI = "\x1b[2J\x1b]0;pwned\x07\u202e"
BAD_BODIES = [
    b"", b"not json", b"\xff\xfe\x00", b"[1, 2]", b'"a string"', b"null", b"1" * 5000, b"[" * 100_000,
    json.dumps({"messages": ANSI}).encode(), json.dumps({"messages": []}).encode(),
    json.dumps({"messages": [{"role": ANSI, "content": "x"}]}).encode(),
    json.dumps({"messages": [{"role": "user", "content": {"x": 1}}]}).encode(),
    json.dumps({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": ANSI}}]}]}
               ).encode(),
    json.dumps({"messages": [{"role": "user", "content": "x" * 3_000_000}], "tools": "x" * 1_000_000}).encode(),
    json.dumps({"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}).encode(),
    json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": -5}).encode(),
    json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": True}).encode(),
    json.dumps({"messages": [{"role": "user", "content": "hi"}], "stop": [1, 2], "stop_sequences": [1]}).encode(),
    json.dumps({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}).encode(),
    json.dumps({"messages": [{"role": "tool", "content": "x"}]}).encode(),
    json.dumps({"messages": [{"role": "assistant", "content": "x", "tool_calls": [{"id": 5}]},
                             {"role": "user", "content": [{"type": "tool_use", "id": 5}]}]}).encode(),
    json.dumps({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": 3}]}]}).encode(),
    json.dumps({"messages": [{"role": "user", "content": [{"type": "document", "source": ANSI}]}]}).encode(),
    json.dumps({"model": ["x"], "messages": [{"role": "user", "content": "hi"}]}).encode(),
]


class Echo:
    name = "echo"

    def __init__(self) -> None:
        self.calls = 0

    def respond(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelResponse:
        self.calls += 1
        return ModelResponse(Message("assistant", (TextBlock("ok"),)), "end_turn")


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_every_malformed_body_is_a_400_that_says_what_was_wrong_with_nothing_raw(path: str) -> None:
    model = Echo()
    gateway = Gateway(model)
    for body in BAD_BODIES:
        answer = gateway.handle(HttpRequest("POST", path, (), body))
        assert answer.status == 400, (body[:100], answer.body[:300])
        data = json.loads(answer.body)
        message = data["error"]["message"]
        assert data["error"]["type"] == "invalid_request_error"
        assert "\x1b" not in message and "\u202e" not in message and "\x07" not in message
        assert len(message) < 2000 and "(a correct request body: {" in message
    assert model.calls == 0
    good = GOOD_OPENAI if path == "/v1/chat/completions" else GOOD_ANTHROPIC
    assert gateway.handle(HttpRequest("POST", path, (), json.dumps(good).encode())).status == 200
    assert model.calls == 1


def _mutate(value: Any, rng: random.Random) -> Any:
    """`value` with one part replaced by something of another type (or hostile text)."""
    junk = [None, 0, -1, 1.5, True, "", ANSI, "x" * 10_000, [], {}, [None], {"type": ANSI}, 10**30]
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(list(value))
        return {**value, key: _mutate(value[key], rng)}
    if isinstance(value, list) and value and rng.random() < 0.8:
        i = rng.randrange(len(value))
        return [*value[:i], _mutate(value[i], rng), *value[i + 1:]]
    return rng.choice(junk)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_random_wrong_types_anywhere_never_crash_the_gateway(path: str) -> None:
    rng = random.Random(20261204)
    gateway = Gateway(Echo())
    good = GOOD_OPENAI if path == "/v1/chat/completions" else GOOD_ANTHROPIC
    statuses = set()
    for _ in range(600):
        body = json.dumps(_mutate(good, rng)).encode()
        answer = gateway.handle(HttpRequest("POST", path, (), body))
        statuses.add(answer.status)
        assert answer.status in (200, 400), answer.body[:300]
        json.loads(answer.body) if answer.headers[0][1] == "application/json" else None
    assert statuses == {200, 400}          # both outcomes happened: the mutations were not all fatal


def test_hostile_targets_and_methods_are_refused_without_echoing_control_characters() -> None:
    gateway = Gateway(Echo())
    for method, target in [("GET", f"/{ANSI}"), (ANSI, "/v1/models"), ("CONNECT", f"{ANSI}:443"),
                           ("GET", "http://" + "a" * 100_000)]:
        answer = gateway.handle(HttpRequest(method, target, (), b""))
        assert answer.status == 403
        assert b"\x1b" not in answer.body and len(answer.body) < 5000
        assert answer.reason.isascii() and "\n" not in answer.reason

"""Other real clients a sandboxed agent uses: litellm (mini-swe-agent, aider) in both dialects, streamed
as aider asks, and the anthropic SDK's beta route (`/v1/messages?beta=true`, as Claude Code calls it);
several agents' threads at once are served one model call at a time."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import litellm

from harness.gateway import Gateway, GatewayBudgets
from harness.messages import Message, TextBlock
from harness.models import ModelResponse, Usage
from sandbox.loopback import HttpRequest
from tests.gateway.conftest import bash_then_done, served

ASK = [{"role": "user", "content": "List the files."}]
COMMAND = {"type": "object", "properties": {"command": {"type": "string"}}}
BASH = {"type": "function", "function": {"name": "bash", "description": "Run a command", "parameters": COMMAND}}


def test_litellm_streams_an_openai_answer_with_its_tool_call_as_aider_reads_it() -> None:
    with served(Gateway(bash_then_done())) as url:
        stream = litellm.completion(model="openai/harness", api_base=f"{url}/v1", api_key="dummy", messages=ASK,
                                    tools=[BASH], stream=True, num_retries=0)
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [t for c in chunks if c.choices for t in (c.choices[0].delta.tool_calls or [])]
    assert text == "Looking."
    assert [(t.function.name, json.loads(t.function.arguments)) for t in calls] == [("bash", {"command": "ls -la"})]


def test_litellm_reaches_the_anthropic_route_too() -> None:
    with served(Gateway(bash_then_done())) as url:
        answer = litellm.completion(model="anthropic/claude-harness", api_base=url, api_key="dummy", messages=ASK,
                                    tools=[BASH], max_tokens=100, num_retries=0)
    message = answer.choices[0].message
    assert message.content == "Looking."
    assert message.tool_calls[0].function.name == "bash"
    assert json.loads(message.tool_calls[0].function.arguments) == {"command": "ls -la"}


def test_the_anthropic_beta_route_with_its_query_string_is_served() -> None:
    with served(Gateway(bash_then_done())) as url:
        client = anthropic.Anthropic(base_url=url, api_key="dummy", max_retries=0, timeout=10)
        answer = client.beta.messages.create(model="m", max_tokens=100, messages=ASK)
    assert answer.content[0].type == "text"


class Slow:
    """A model that notes how many calls run at once."""

    name = "slow"

    def __init__(self) -> None:
        self.running = self.most = self.calls = 0
        self._lock = threading.Lock()

    def respond(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelResponse:
        with self._lock:
            self.running += 1
            self.calls += 1
            self.most = max(self.most, self.running)
        time.sleep(0.01)
        with self._lock:
            self.running -= 1
        return ModelResponse(Message("assistant", (TextBlock("ok"),)), "end_turn", Usage(10, 1))


def test_concurrent_requests_reach_the_model_one_at_a_time_and_never_overrun_the_call_budget() -> None:
    model = Slow()
    gateway = Gateway(model, budgets=GatewayBudgets(max_calls=25))
    body = json.dumps({"messages": ASK}).encode()
    with ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(lambda _: gateway.handle(HttpRequest("POST", "/v1/chat/completions", (), body)).status,
                                 range(60)))
    assert model.most == 1
    assert (statuses.count(200), statuses.count(400), model.calls) == (25, 35, 25)
    assert gateway.totals.calls == 25 and gateway.totals.usage == Usage(250, 25)

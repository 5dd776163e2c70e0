"""Budgets: a call beyond one is refused with 400 in the provider's shape and `exhausted` names it."""

from __future__ import annotations

import json

import openai
import pytest

from harness.config import LoopConfig
from harness.errors import ConfigError
from harness.gateway import Gateway, GatewayBudgets
from harness.models.scripted import ScriptedModel
from sandbox.loopback import HttpRequest
from tests.gateway.conftest import served

ASK = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
ASK_ANTHROPIC = json.dumps({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}).encode()


def _texts(n: int, usage: dict[str, int]) -> ScriptedModel:
    return ScriptedModel([{"content": [{"type": "text", "text": f"reply {i}"}], "usage": usage} for i in range(n)])


def _post(gateway: Gateway, path: str = "/v1/chat/completions", body: bytes = ASK) -> tuple[int, dict[str, object]]:
    answer = gateway.handle(HttpRequest("POST", path, (), body))
    return answer.status, json.loads(answer.body)


def test_the_call_after_max_calls_is_refused_with_400_naming_the_budget() -> None:
    model = _texts(5, {"input_tokens": 1, "output_tokens": 1})
    gateway = Gateway(model, budgets=GatewayBudgets(max_calls=2))
    assert [_post(gateway)[0] for _ in range(2)] == [200, 200]
    assert gateway.exhausted is None
    status, body = _post(gateway)
    assert status == 400
    assert "max_calls = 2" in body["error"]["message"]
    assert gateway.exhausted is not None and (gateway.exhausted.budget, gateway.exhausted.limit) == ("max_calls", 2)
    assert model.calls == 2                                      # the refused call never reached the model
    status, anthropic_body = _post(gateway, "/v1/messages", ASK_ANTHROPIC)
    assert status == 400 and anthropic_body["type"] == "error"


def test_the_token_budget_counts_cached_tokens_and_stops_after_the_call_that_crossed_it() -> None:
    gateway = Gateway(_texts(5, {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 40}),
                      budgets=GatewayBudgets(max_total_tokens=100))
    assert [_post(gateway)[0] for _ in range(3)] == [200, 200, 400]      # 55, then 110 >= 100
    assert gateway.totals.tokens == 110 and gateway.exhausted is not None
    assert gateway.exhausted.budget == "max_total_tokens"


def test_the_cost_budget_uses_the_price_and_needs_one() -> None:
    usage = {"input_tokens": 1_000_000, "output_tokens": 0, "cache_read_tokens": 1_000_000}
    gateway = Gateway(_texts(5, usage), budgets=GatewayBudgets(max_cost_usd=5.0), price=[3.0, 15.0, 0.3, 3.75])
    assert [_post(gateway)[0] for _ in range(3)] == [200, 200, 400]      # $3.30, then $6.60 >= $5
    assert gateway.totals.cost_usd == pytest.approx(6.6)
    assert gateway.exhausted is not None and gateway.exhausted.budget == "max_cost_usd"
    with pytest.raises(ConfigError, match="max_cost_usd 5.0.*no price"):
        Gateway(_texts(1, usage), budgets=GatewayBudgets(max_cost_usd=5.0))


def test_budgets_come_from_the_loop_config() -> None:
    assert GatewayBudgets.from_loop(LoopConfig(max_turns=7, max_total_tokens=1000, max_cost_usd=2.5)) == \
        GatewayBudgets(max_calls=7, max_total_tokens=1000, max_cost_usd=2.5)


def test_the_openai_sdk_gets_the_budget_refusal_at_once_without_retrying() -> None:
    model = _texts(3, {"input_tokens": 1, "output_tokens": 1})
    gateway = Gateway(model, budgets=GatewayBudgets(max_calls=1))
    with served(gateway) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", timeout=10)     # the SDK's default retries on
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.BadRequestError, match="max_calls = 1"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert gateway.totals.calls == 1 and model.calls == 1

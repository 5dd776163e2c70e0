"""The retry policy against a real local server: what is retried, how long it waits, when it stops."""

from __future__ import annotations

import anthropic
import pytest

from harness.config import ModelConfig
from harness.errors import ModelError
from harness.models.retry import call_with_retries

OK = {"id": "m", "type": "message", "role": "assistant", "model": "x", "content": [{"type": "text", "text": "hi"}],
      "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}
LIMITED = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}


def _call(url: str, config: ModelConfig, waits: list[float]):  # type: ignore[no-untyped-def]
    client = anthropic.Anthropic(api_key="k", base_url=url, max_retries=0, timeout=5)
    return call_with_retries(lambda: client.messages.create(model="x", max_tokens=5,
                                                            messages=[{"role": "user", "content": "hi"}]),
                             provider="anthropic", config=config, api_errors=(anthropic.APIError,),
                             sleep=waits.append)


def test_server_retry_after_header_is_honoured(provider) -> None:
    provider.reply(429, LIMITED, {"retry-after": "2"})
    provider.reply(200, OK)
    waits: list[float] = []
    _call(provider.url, ModelConfig(retry_initial_seconds=0.01, retry_max_seconds=5), waits)
    assert len(waits) == 1 and 2.0 <= waits[0] <= 5.0


def test_waits_never_exceed_the_configured_maximum(provider) -> None:
    provider.reply(429, LIMITED, {"retry-after": "3600"})
    provider.reply(429, LIMITED)
    provider.reply(200, OK)
    waits: list[float] = []
    _call(provider.url, ModelConfig(retry_initial_seconds=0.5, retry_max_seconds=1.0), waits)
    assert len(waits) == 2 and all(0.0 <= w <= 1.0 for w in waits) and waits[0] == 1.0


def test_attempts_are_bounded_by_max_retries(provider) -> None:
    for _ in range(4):
        provider.reply(429, LIMITED)
    waits: list[float] = []
    with pytest.raises(ModelError, match=r"anthropic API call failed \(HTTP 429\) after 3 attempt\(s\).*"
                                         r"raise model.max_retries or try again later"):
        _call(provider.url, ModelConfig(max_retries=2, retry_initial_seconds=0.01, retry_max_seconds=0.05), waits)
    assert len(provider.requests) == 3 and len(waits) == 2


def test_zero_retries_means_one_attempt(provider) -> None:
    provider.reply(503, {"type": "error", "error": {"type": "api_error", "message": "down"}})
    provider.reply(200, OK)
    with pytest.raises(ModelError, match=r"HTTP 503\) after 1 attempt"):
        _call(provider.url, ModelConfig(max_retries=0), [])
    assert len(provider.requests) == 1

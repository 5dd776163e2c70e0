"""cost_usd with cache prices, and what each adapter's Usage.input_tokens holds (no cached token in either)."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.models import Usage, cost_usd
from harness.models.anthropic import parse_response as parse_anthropic
from harness.models.openai import parse_response as parse_openai

USAGE = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=2_000_000,
              cache_write_tokens=1_000_000)


def test_two_prices_charge_cached_tokens_as_input_and_four_at_their_own_prices() -> None:
    assert cost_usd(USAGE, [3.0, 15.0]) == pytest.approx(4 * 3.0 + 15.0)
    assert cost_usd(USAGE, [3.0, 15.0, 0.3, 3.75]) == pytest.approx(3.0 + 15.0 + 2 * 0.3 + 3.75)


def test_an_unknown_price_is_no_cost_never_zero() -> None:
    assert cost_usd(USAGE, None) is None
    assert cost_usd(USAGE, []) is None
    assert cost_usd(Usage(), [3.0, 15.0]) == 0.0


@pytest.mark.parametrize("price", [[3.0], [3.0, 15.0, 0.3], [3.0, -1.0], [3.0, float("nan")], ["3", 15.0]])
def test_a_malformed_price_is_refused_with_an_example(price: list[float]) -> None:
    with pytest.raises(ConfigError, match=r"\[input, output, cache_read, cache_write\].*e\.g\."):
        cost_usd(USAGE, price)


def test_openai_prompt_tokens_include_cached_ones_and_the_adapter_takes_them_out() -> None:
    response = parse_openai({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 1000, "completion_tokens": 10,
                                       "prompt_tokens_details": {"cached_tokens": 800}}})
    assert response.usage == Usage(input_tokens=200, output_tokens=10, cache_read_tokens=800)
    assert cost_usd(response.usage, [2.0, 8.0, 0.5, 0.0]) == pytest.approx((200 * 2.0 + 10 * 8.0 + 800 * 0.5) / 1e6)


def test_anthropic_input_tokens_exclude_cache_reads_and_writes_and_map_one_to_one() -> None:
    response = parse_anthropic({"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
                                "usage": {"input_tokens": 50, "output_tokens": 10, "cache_read_input_tokens": 900,
                                          "cache_creation_input_tokens": 100}})
    assert response.usage == Usage(input_tokens=50, output_tokens=10, cache_read_tokens=900, cache_write_tokens=100)
    assert cost_usd(response.usage, [3.0, 15.0, 0.3, 3.75]) == pytest.approx(
        (50 * 3.0 + 10 * 15.0 + 900 * 0.3 + 100 * 3.75) / 1e6)

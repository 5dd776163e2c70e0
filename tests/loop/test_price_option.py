"""`--price` on `harness run` and `harness eval`: two numbers (input, output) or four (then cached input read
and written); cached tokens are charged at their own price only when given (no sandbox needed: the CLI's
option handling, then the loop's cost rule)."""

from __future__ import annotations

import argparse

import pytest

from harness.cli.main import main
from harness.cli.run_cmd import add_session_options, apply_options
from harness.config import Config
from harness.errors import ConfigError
from harness.models import Usage, cost_usd

CACHED = Usage(input_tokens=1_000_000, output_tokens=0, cache_read_tokens=1_000_000, cache_write_tokens=1_000_000)


def _config(*price: str) -> Config:
    parser = argparse.ArgumentParser()
    add_session_options(parser)
    args = parser.parse_args(["--model", "anthropic:claude-sonnet-4-5", "--price", *price])
    return apply_options(Config(), args)


def test_four_numbers_price_cached_input_at_its_own_price() -> None:
    prices = _config("3", "15", "0.3", "3.75").model.prices
    assert prices == {"anthropic:claude-sonnet-4-5": [3.0, 15.0, 0.3, 3.75]}
    assert cost_usd(CACHED, prices["anthropic:claude-sonnet-4-5"]) == pytest.approx(3 + 0.3 + 3.75)
    two = _config("3", "15").model.prices["anthropic:claude-sonnet-4-5"]      # the control: cache charged as input
    assert cost_usd(CACHED, two) == pytest.approx(3 * 3)


def test_another_count_of_numbers_is_refused_saying_what_is_expected() -> None:
    with pytest.raises(ConfigError, match=r"--price takes 2 or 4 numbers .* got 3: \[3.0, 15.0, 0.3\]; "
                                          r"e.g. --price 3 15 0.3 3.75"):
        _config("3", "15", "0.3")


@pytest.mark.parametrize("command", ["run", "eval"])
def test_both_commands_take_the_option_and_refuse_a_bad_one_before_any_work(
        command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "tasks/wordcount", "--model", "scripted:wordcount-fix", "--price", "1"]) == 2
    assert "--price takes 2 or 4 numbers" in capsys.readouterr().err

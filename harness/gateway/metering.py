"""What the gateway counts and where it stops: calls, tokens and cost against the run's budgets.

A call beyond a budget is refused before it reaches the model (`Meter.check`), so a budget is never
overrun by more than the one call that crossed it, the same rule as the loop's (`harness.agent.loop`).
Tokens counted are every input token (cached ones included) plus the output.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from harness.config import LoopConfig
from harness.errors import ConfigError
from harness.models import Usage, cost_usd

BudgetName = Literal["max_calls", "max_total_tokens", "max_cost_usd", "recording"]
"""Which budget ran out (`recording`: the replayed recording has no message left)."""


@dataclass(frozen=True)
class GatewayBudgets:
    """Limits over the whole run; None means no limit."""

    max_calls: int | None = None
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None

    @staticmethod
    def from_loop(loop: LoopConfig) -> GatewayBudgets:
        """The loop's budgets for a third-party agent: its turns are our model calls."""
        return GatewayBudgets(max_calls=loop.max_turns, max_total_tokens=loop.max_total_tokens,
                              max_cost_usd=loop.max_cost_usd)


@dataclass(frozen=True)
class BudgetSpent:
    """The budget that stopped the run: its name, its limit, what was spent and the message sent back."""

    budget: BudgetName
    limit: float
    spent: float
    message: str


@dataclass(frozen=True)
class Totals:
    """Everything metered so far: calls answered by the model, refused requests, tokens, cost (None
    without a price), seconds spent in the model."""

    calls: int = 0
    refused: int = 0
    usage: Usage = Usage()
    cost_usd: float | None = None
    model_seconds: float = 0.0

    @property
    def tokens(self) -> int:
        u = self.usage
        return u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens


class Meter:
    """Totals and budgets; each update is atomic (the gateway checks and adds under its model lock)."""

    def __init__(self, budgets: GatewayBudgets, price: Sequence[float] | None) -> None:
        if budgets.max_cost_usd is not None and not price:
            raise ConfigError(f"a cost budget is set (max_cost_usd {budgets.max_cost_usd}) but the model has no "
                              "price; give one in USD per million tokens, e.g. price=[3.0, 15.0] (or model.prices "
                              '{"anthropic:claude-sonnet-4-5": [3.0, 15.0, 0.3, 3.75]})')
        cost_usd(Usage(), price)                       # a malformed price fails here, not after a call
        self.budgets, self.price = budgets, list(price) if price else None
        self.totals = Totals(cost_usd=0.0 if self.price else None)
        self.spent: BudgetSpent | None = None
        self._lock = threading.Lock()

    def check(self) -> BudgetSpent | None:
        """The budget the next call would go beyond, if any (remembered in `spent`)."""
        b, t = self.budgets, self.totals
        found: tuple[BudgetName, float, float] | None = None
        if b.max_calls is not None and t.calls >= b.max_calls:
            found = ("max_calls", b.max_calls, t.calls)
        elif b.max_total_tokens is not None and t.tokens >= b.max_total_tokens:
            found = ("max_total_tokens", b.max_total_tokens, t.tokens)
        elif b.max_cost_usd is not None and (t.cost_usd or 0.0) >= b.max_cost_usd:
            found = ("max_cost_usd", b.max_cost_usd, t.cost_usd or 0.0)
        if found is None:
            return None
        name, limit, spent = found
        self.spent = BudgetSpent(name, limit, spent, f"the run's budget {name} = {limit:g} is spent ({spent:g} so "
                                 "far): no more model calls are answered in this run; finish with what you have")
        return self.spent

    def recording_ended(self, message: str) -> BudgetSpent:
        self.spent = BudgetSpent("recording", self.totals.calls, self.totals.calls, message)
        return self.spent

    def add(self, usage: Usage, seconds: float) -> float | None:
        """Count one answered call; its cost (None without a price)."""
        cost = cost_usd(usage, self.price)
        with self._lock:
            t = self.totals
            self.totals = Totals(calls=t.calls + 1, refused=t.refused, usage=t.usage + usage,
                                 cost_usd=None if cost is None else (t.cost_usd or 0.0) + cost,
                                 model_seconds=t.model_seconds + seconds)
        return cost

    def refused(self) -> None:
        with self._lock:
            t = self.totals
            self.totals = Totals(t.calls, t.refused + 1, t.usage, t.cost_usd, t.model_seconds)

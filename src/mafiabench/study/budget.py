"""The budget guard: stop starting games once spent plus expected spend in flight reaches the cap."""

from __future__ import annotations

import duckdb

from mafiabench.errors import UserError
from mafiabench.prices import PriceTable, Usage
from mafiabench.study.spec import Budget
from mafiabench.warehouse import landing


class BudgetGuard:
    """Stops starting games once spent + what the games in flight are expected to spend reaches the cap.

    `spent` counts every landed game of the experiment (earlier runs included) and each game of this run as it
    finishes; a game in flight is expected to cost the mean of the finished ones. So the overshoot is bounded by the
    games in flight whose cost exceeds the mean, and no game is started once the cap is reached.
    """

    def __init__(self, budget: Budget, spent: Usage) -> None:
        self.budget = budget
        self.spent = Usage()
        self.spent.add(spent)
        self._finished_games = max(spent.games, 0)
        self.in_flight = 0
        self.stopped = False

    def _mean(self) -> tuple[float, float]:
        n = self._finished_games
        if n <= 0:
            return 0.0, 0.0
        return self.spent.tokens / n, self.spent.cost_usd / n

    def _reached(self, tokens: float, usd: float) -> bool:
        b = self.budget
        return (b.max_tokens is not None and tokens >= b.max_tokens) or (b.max_usd is not None and usd >= b.max_usd)

    def try_start(self) -> bool:
        if not self.budget.active:
            self.in_flight += 1
            return True
        mean_tokens, mean_usd = self._mean()
        ahead = self.in_flight
        if self._reached(self.spent.tokens + ahead * mean_tokens, self.spent.cost_usd + ahead * mean_usd):
            self.stopped = True
            return False
        self.in_flight += 1
        return True

    def finish(self, usage: Usage | None, games: int = 1) -> None:
        """`games` started games ended (`usage`: what they spent together; None: not played)."""
        self.in_flight -= games
        if usage is not None:
            self.spent.add(usage)
            self._finished_games += games


def landed_usage(con: duckdb.DuckDBPyConnection, experiment: str, prices: PriceTable) -> Usage:
    """What the experiment's landed games spent (earlier runs included): the guard's starting point."""
    total = Usage()
    for provider, model, calls, tin, tout, tcached in landing.usage_by_model(con, experiment):
        spec = f"{provider}/{model}"
        cost = prices.cost(spec, tin, tout, tcached)
        total.add(
            Usage(
                calls=calls,
                input_tokens=tin,
                output_tokens=tout,
                cached_tokens=tcached,
                cost_usd=cost or 0.0,
                unpriced={spec} if cost is None else set(),
            )
        )
    row = con.execute("select count(*) from raw_games where experiment = $e", {"e": experiment}).fetchone()
    games = int(row[0]) if row else 0
    total.games = games
    return total


def require_prices(budget: Budget, specs: list[str], prices: PriceTable) -> None:
    """A cap in dollars needs a price for every model that costs money: refuse the run before any game otherwise."""
    if budget.max_usd is None:
        return
    unpriced = [s for s in specs if not prices.is_free(s) and prices.lookup(s) is None and not s.startswith("human/")]
    if unpriced:
        raise UserError(
            f"budget.max_usd is set but these models have no price: {', '.join(unpriced)}; add a [[prices]] row for "
            "each to the experiment (provider, model, input, output: USD per million tokens)"
        )

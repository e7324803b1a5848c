"""Cost and operations: money from the versioned price table, tokens per call/game/cell, prefix reuse."""

from __future__ import annotations

import tomllib

import pytest

from mafiabench.prices import DEFAULT_PRICES_PATH as PRICES_PATH
from mafiabench.transform.build.marts import ref_prices as load_prices
from support.records import call, landed, mini_record, one, rows


@pytest.fixture(scope="module")
def con():
    calls = [
        call(0, "openai", "gpt-4.1-mini", inp=1000, out=100, cached=200, prompt=400, reuse=0),
        call(1, "openai", "gpt-4.1-mini", inp=1000, out=100, cached=800, prompt=500, reuse=400,
             error="RateLimitError", attempts=3),
        call(2, "fake", "anything", inp=50, out=5),
        call(3, "acme", "unknown-model", inp=10, out=1, error="APIError", failed=True),
    ]
    return landed([mini_record("g", calls=calls, design={"experiment": "e", "cell": "c1", "capabilities": []})],
                  only=["fct_model_calls", "mart_game_costs", "mart_cell_costs"])


def test_price_table_is_versioned() -> None:
    data = tomllib.loads(PRICES_PATH.read_text())
    assert data["version"]
    prices = load_prices()
    assert prices.filter(prices["provider"] == "fake")["input_per_mtok"].to_list() == [0.0]


def test_call_cost_uses_cached_price_for_cached_tokens(con) -> None:
    c0 = one(con, "select * from fct_model_calls where call_index = 0")
    assert c0["cost_usd"] == pytest.approx((800 * 0.40 + 200 * 0.10 + 100 * 1.60) / 1e6)
    assert c0["priced"] and c0["price_version"] == load_prices()["price_version"][0]
    assert one(con, "select cost_usd from fct_model_calls where call_index = 2")["cost_usd"] == 0.0
    unknown = one(con, "select * from fct_model_calls where call_index = 3")
    assert unknown["cost_usd"] is None and not unknown["priced"] and unknown["failed"]


def test_game_costs(con) -> None:
    g = one(con, "select * from mart_game_costs")
    assert (g["n_calls"], g["n_failed_calls"], g["n_retried_calls"], g["n_attempts"]) == (4, 1, 1, 6)
    assert g["input_tokens"] == 2060 and g["output_tokens"] == 206 and g["cached_tokens"] == 1000
    assert g["fully_priced"] is False
    assert g["prefix_reuse_share"] == pytest.approx(400 / 1100)


def test_cell_costs(con) -> None:
    got = {r["model"]: r for r in rows(con, "select * from mart_cell_costs")}
    mini = got["gpt-4.1-mini"]
    assert (mini["study"], mini["cell"], mini["n_games"], mini["n_calls"]) == ("e", "c1", 1, 2)
    assert mini["tokens_per_game"] == 2200 and mini["input_tokens_per_call"] == 1000
    assert mini["n_calls_with_errors"] == 1 and mini["fully_priced"]
    assert mini["latency_ms_p50"] == pytest.approx(150.0)
    assert mini["prefix_reuse_share"] == pytest.approx(400 / 900)


def test_run_operations_from_the_run_ledger() -> None:
    from mafiabench.warehouse.landing import record_run

    c = landed([], only=["mart_runs"])
    record_run(c, {"run_id": "r1", "experiment": "e", "status": "done", "wall_s": 10.0, "games_planned": 100,
                   "games_already_landed": 40, "games_played": 50, "games_done": 90, "games_failed": 10,
                   "calls": 200, "failed_calls": 5, "games_concurrency": 7.5})
    from mafiabench.transform.build.marts import build_models

    build_models(c, only=["mart_runs"])
    r = one(c, "select * from mart_runs")
    assert (r["games_planned"], r["games_done"], r["games_skipped_already_landed"], r["games_failed"]) == (
        100, 90, 40, 10
    )
    assert r["games_per_second"] == 5.0 and r["failed_call_share"] == 0.025 and r["games_concurrency"] == 7.5

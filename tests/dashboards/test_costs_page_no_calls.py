"""The cost page of a study of scripted players (no model call: bench_landing's million policy games): its totals
are 0, known exactly, not "–" (missing), and it names no price table version ("version none" read as a bug); with
calls, the sums and the version are the mart's."""

from __future__ import annotations

import re

import duckdb

from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import render_page
from mafiabench.dashboards.page_registry import Context
from mafiabench.dashboards.pages import costs

CELL = ("study varchar, cell varchar, provider varchar, model varchar, n_games bigint, n_calls bigint, "
        "n_failed_calls bigint, n_replaced_calls bigint, n_retried_calls bigint, n_calls_with_errors bigint, "
        "input_tokens hugeint, output_tokens hugeint, cached_tokens hugeint, input_tokens_per_call double, "
        "output_tokens_per_call double, tokens_per_game double, cost_usd double, cost_usd_per_game double, "
        "fully_priced boolean, price_version varchar, latency_ms_p50 double, latency_ms_p95 double, "
        "prefix_reuse_share double")
GAME = ("game_id varchar, n_calls bigint, n_failed_calls bigint, n_replaced_calls bigint, n_retried_calls bigint, "
        "n_attempts hugeint, n_format_failures bigint, input_tokens hugeint, output_tokens hugeint, "
        "cached_tokens hugeint, total_tokens hugeint, cost_usd double, fully_priced boolean, latency_ms_total double, "
        "prompt_chars hugeint, prefix_reuse_chars hugeint, prefix_reuse_share double")


def _tiles(calls: bool) -> tuple[dict[str, str], str]:
    con = duckdb.connect()
    con.execute(f"create table mart_cell_costs ({CELL})")
    con.execute(f"create table mart_game_costs ({GAME})")
    if calls:
        con.execute("insert into mart_cell_costs values ('s', 'c', 'fake', 'm', 2, 10, 1, 0, 2, 1, 1000, 200, 0, "
                    "100, 20, 600, 0.5, 0.25, true, '2026-11', 10, 20, 0.5)")
        con.execute("insert into mart_game_costs values ('g1', 10, 1, 0, 2, 13, 4, 1000, 200, 0, 1200, 0.5, true, "
                    "100, 4000, 2000, 0.5)")
    html = render_page(costs.build(Context(Marts(con), {"build_id": "b1"})), nav=[])
    tiles = dict((label, value) for value, label in re.findall(
        r'<div class="tile-value">(.*?)</div><div class="tile-label">(.*?)</div>', html))
    return tiles, html


def test_no_model_call_totals_zero_and_names_no_price_version() -> None:
    tiles, html = _tiles(calls=False)
    assert tiles["model calls"] == "0" and tiles["input tokens"] == "0" and tiles["retry attempts"] == "0"
    assert tiles["cost (US$)"] == "$0.0000"
    assert "No model was called" in html and "version none" not in html


def test_calls_give_the_marts_sums_and_price_version() -> None:
    tiles, html = _tiles(calls=True)
    assert tiles["model calls"] == "10" and tiles["input tokens"] == "1,000" and tiles["retry attempts"] == "3"
    assert "(version 2026-11)" in html and "No model was called" not in html

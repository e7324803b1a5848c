"""The listing-order leak check in the gate (issue 35 item 1, `mart_listing_leaks`): a simulated study whose seat
order lists the mafia first is refused; the same games in the engine's shuffled seats pass; an imported dataset with
the cue is published, its leak shown in the mart; a study with too few games says so instead of "no leak"."""

from __future__ import annotations

import dataclasses
from typing import Any

import duckdb
import pytest
from scipy.stats import binomtest

from mafiabench.publish import build_warehouse
from mafiabench.warehouse.listing_leaks import PositionLeak, holm, listing_leaks
from mafiabench.warehouse.raw import load_records
from support.records import engine_records, mini_record, rows

RULE = ("no simulated study lists its players in an order that tells their role (mart_listing_leaks: Holm-adjusted "
        "exact binomial p < 0.001 and a departure of at least 5 percentage points at a listed position with at least "
        "10 games)")


def mafia_first(record: Any) -> Any:
    """The record with its seats renumbered so that the mafia sit first (a deliberately unshuffled order)."""
    order = sorted(record.players, key=lambda p: (p.team != "mafia", p.seat))
    seat = {p.name: i for i, p in enumerate(order)}
    return dataclasses.replace(record, players=[dataclasses.replace(p, seat=seat[p.name]) for p in record.players])


def leaks(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    return rows(con, "select * from mart_listing_leaks order by source, listing, position")


def test_holm_by_hand() -> None:
    # sorted: 0.005 * 4 = 0.02, 0.01 * 3 = 0.03, 0.03 * 2 = 0.06, 0.04 * 1 = 0.04 -> raised to 0.06 (monotone)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0]) and holm([]) == []


def test_a_significant_departure_under_five_points_is_not_a_leak() -> None:
    # BENCHMARKS' million games copied from 20,000 (each seating 50 times): the second seat is mafia in 25.22% of
    # 1,000,000 four-player games against 25% expected. Exact two-sided p by scipy; hand: z = 2,200 / sqrt(1e6 * 0.25
    # * 0.75) = 5.08, p about 4e-7: significant, but a 0.22-point cue tells no reader a role.
    p = binomtest(252_200, 1_000_000, 0.25).pvalue
    assert 1e-7 < p < 1e-6
    small = PositionLeak("simulation:bench", True, "seats", 2, 1_000_000, 252_200, 250_000.0, p, 4 * p, 4)
    assert small.significant and not small.leak and small.verdict == "small departure"
    assert small.departure == pytest.approx(0.0022)
    # the same departure at 5 points is a leak; the human export's first seat (43 of 43, expected about 12.9) too
    big = dataclasses.replace(small, mafia=300_000)
    assert big.leak and big.verdict == "leak"
    human = PositionLeak("ibraheem2022-human", False, "seats", 1, 43, 43, 12.9, 1e-23, 1.7e-28, 20)
    assert human.leak and human.departure == pytest.approx(0.7)
    # not significant: no leak whatever the departure
    assert dataclasses.replace(small, mafia=300_000, p_holm=0.5).verdict == "no leak"


def test_a_study_that_lists_the_mafia_first_is_refused(fresh_warehouse: duckdb.DuckDBPyConnection) -> None:
    con = fresh_warehouse
    load_records(con, [mafia_first(r) for r in engine_records(12)])
    result = build_warehouse(con, raise_on_failure=False)
    assert not result.published
    failed = {f.rule: f.failing_rows for f in result.failures}
    assert list(failed) == [RULE]
    assert [(r["source"], r["listing"], r["position"], r["games"], r["mafia"]) for r in failed[RULE]] == [
        ("simulation:?", "seats", 1, 12, 12)]
    # refused, so nothing is published: the mart's computation on the same warehouse
    first = listing_leaks(con)[0]
    # hand-computed: four players, one mafioso, first in 12 of 12 games; the two-sided exact p is (1/4)^12 (no lower
    # count is as unlikely: P(0) = (3/4)^12 = 0.03); the smallest of the 4 positions tested, Holm multiplies it by 4
    assert (first.position, first.mafia, first.n, first.expected) == (1, 12, 12, pytest.approx(3.0))
    assert first.p_value == pytest.approx(0.25 ** 12, rel=1e-9)
    assert first.p_holm == pytest.approx(4 * 0.25 ** 12, rel=1e-9)
    assert first.family == 4 and first.leak and first.verdict == "leak"


def test_the_engine_s_shuffled_seats_pass(fresh_warehouse: duckdb.DuckDBPyConnection) -> None:
    con = fresh_warehouse
    load_records(con, engine_records(12))
    result = build_warehouse(con)
    assert result.published
    got = leaks(con)
    assert [(r["position"], r["verdict"]) for r in got] == [(i, "no leak") for i in range(1, 5)]
    assert sum(r["mafia"] for r in got) == 12
    for r in got:  # the mart's p-value is scipy's exact binomial test at the games' mafia share
        assert r["p_value"] == pytest.approx(binomtest(r["mafia"], 12, 0.25).pvalue)
    check = next(r for r in result.validation if r.rule == RULE)
    assert check.success and check.element_count == 0


def test_an_imported_dataset_with_the_cue_is_published_and_reported(
        fresh_warehouse: duckdb.DuckDBPyConnection) -> None:
    con = fresh_warehouse
    # the human dataset's shape: the mafia's nodes created first, so seat 0 is the mafioso in every game
    load_records(con, [mini_record(f"human-{i}", source="dallinger") for i in range(12)] + engine_records(12))
    result = build_warehouse(con)
    assert result.published
    human = [r for r in leaks(con) if r["source"] == "dallinger"]
    assert [(r["origin"], r["position"], r["mafia"], r["verdict"]) for r in human] == [
        ("imported", 1, 12, "leak"), ("imported", 2, 0, "no leak"), ("imported", 3, 0, "no leak"),
        ("imported", 4, 0, "no leak")]
    assert {r["origin"] for r in leaks(con) if r["source"] == "simulation:?"} == {"simulated"}


def test_too_few_games_is_not_no_leak(fresh_warehouse: duckdb.DuckDBPyConnection) -> None:
    con = fresh_warehouse
    load_records(con, [mafia_first(r) for r in engine_records(9)])
    result = build_warehouse(con)
    assert result.published  # the gate cannot fail on 9 games ...
    got = leaks(con)
    # ... and the mart does not call them clean
    assert [(r["games"], r["verdict"], r["leak"], r["p_value"]) for r in got] == [(9, "too few games", None, None)] * 4

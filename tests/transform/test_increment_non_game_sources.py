"""A source not keyed by game counts as changed when its content differs from the published build's (its
fingerprint: transform.build.increment.fingerprints), and then exactly its readers are rebuilt: a new run row
rebuilds the run and stopping marts, a protocol card the card's mart, another price table the cost marts; every
other SQL model is kept, and what is published equals a full rebuild, row for row."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mafiabench.prices import load_prices
from mafiabench.publish import build_warehouse
from mafiabench.transform.build import marts
from mafiabench.warehouse.landing import record_run
from mafiabench.warehouse.raw import load_records, record_protocol_card
from support.dashboards import protocol_card_rows
from support.increments import assert_same, full_rebuild, games, kept, published
from support.records import fresh_con


def _rebuilt(result: marts.BuildResult) -> set[str]:
    return {m.name for m in result.models if m.kind == "sql"} - kept(result)


def test_a_changed_source_rebuilds_its_readers_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    con = fresh_con()
    load_records(con, games("a", 6, 0))
    assert build_warehouse(con).published
    assert not _rebuilt(build_warehouse(con))  # nothing changed: everything kept

    record_run(con, {"run_id": "r1", "experiment": "e", "status": "done", "wall_s": 10.0, "games_planned": 8,
                     "games_done": 8, "calls": 20, "unpriced_models": []})
    result = build_warehouse(con)
    assert result.published and _rebuilt(result) == {"stg_runs", "stg_stopping_looks", "mart_runs", "mart_stopping"}
    assert_same(published(con), full_rebuild(con, tmp_path))

    record_protocol_card(con, "e", protocol_card_rows("e"))
    result = build_warehouse(con)
    assert result.published and _rebuilt(result) == {"stg_protocol_cards", "mart_protocol_cards"}
    assert_same(published(con), full_rebuild(con, tmp_path))

    prices = dataclasses.replace(load_prices(), version="another")
    monkeypatch.setattr(marts, "load_price_table", lambda: prices)
    result = build_warehouse(con)
    assert result.published and _rebuilt(result) == {"fct_model_calls", "mart_cell_costs", "mart_game_costs"}
    assert_same(published(con), full_rebuild(con, tmp_path))

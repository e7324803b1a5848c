"""An incremental build (the per-game models computed for the games landed, replaced or removed since the published
build; transform.build.increment) publishes what a full rebuild of the same warehouse publishes, row for row, in every
published relation; and a refused incremental build publishes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from mafiabench.publish import build_warehouse
from mafiabench.warehouse.raw import load_records
from support.increments import assert_same, full_rebuild, games, kept, model_call, published, remove_game
from support.records import design, fresh_con, mini_record

pytestmark = pytest.mark.slow  # a long file: it starts early (tests/conftest.py), not last


def test_an_increment_publishes_what_a_full_rebuild_does(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, games("a", 24, 0))
    first = build_warehouse(con)
    assert first.published and not any(m.materialized == "incremental" for m in first.models)

    # New games (one at another temperature: settings_varied turns true for the published games of model X), a
    # published game replaced by a new record of itself, and a published game removed.
    load_records(con, games("b", 8, 1, temperature=0.2))
    load_records(con, [mini_record("a-0", models="X", votes={"Alice": "Bob", "Bob": "Alice", "Charlie": "Bob"},
                                   design=design("homogeneous|X", None, "X", "X"),
                                   calls=[model_call(0, 0.7)])], replace=True)
    remove_game(con, "e0-3")
    result = build_warehouse(con)
    assert result.published
    incremental = {m.name for m in result.models if m.materialized == "incremental"}
    assert {"fct_games", "fct_player_games", "int_player_games", "int_decisions",
            "mart_deception_scores"} <= incremental
    after = published(con)
    landed = con.execute("select count(*) from raw_games").fetchone()
    assert landed is not None and sum(after["fct_games"].values()) == landed[0]
    assert_same(after, full_rebuild(con, tmp_path))
    varied = con.execute("select count(*) from fct_player_games where settings_varied").fetchone()
    assert varied is not None and varied[0] > 0  # the case of a rewritten published row is exercised

    # Nothing landed: an empty increment keeps every SQL model and publishes the same marts again.
    again = build_warehouse(con)
    assert again.published and kept(again) == {m.name for m in again.models if m.kind == "sql"}
    assert_same(published(con), after)


def test_a_refused_increment_publishes_nothing_and_the_next_build_catches_up(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, games("a", 16, 0))
    assert build_warehouse(con).published
    before = published(con, views=False)  # the staging views read the raw tables: they show what is landed
    raw = {t: before.pop(t) for t in list(before) if t.startswith("raw_")}
    load_records(con, [*games("b", 6, 2), mini_record("bad", models="X", valid=False, invalid_reason="no votes")])
    refused = build_warehouse(con, max_unusable=0.0, raise_on_failure=False)
    assert not refused.published and any(m.materialized == "incremental" for m in refused.models)
    after = published(con, views=False)
    assert {t: after.pop(t) for t in list(after) if t.startswith("raw_")} != raw  # the games stay landed
    assert_same(after, before)
    remove_game(con, "bad")  # an increment's game removed before it was ever published
    result = build_warehouse(con)
    assert result.published and any(m.materialized == "incremental" for m in result.models)
    assert_same(published(con), full_rebuild(con, tmp_path))


def test_a_changed_project_or_full_refresh_builds_whole(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, games("a", 4, 0))
    assert build_warehouse(con).published
    load_records(con, games("b", 2, 3))
    whole = build_warehouse(con, full_refresh=True)
    assert whole.published and not any(m.materialized == "incremental" for m in whole.models)
    load_records(con, games("c", 2, 4))
    changed = build_warehouse(con, upset_threshold=0.1)  # a var of the project: another build's logic
    assert changed.published and not any(m.materialized == "incremental" for m in changed.models)

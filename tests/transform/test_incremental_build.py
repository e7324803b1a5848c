"""An incremental build (the per-game models computed for the games landed, replaced or removed since the published
build; transform.build.increment) publishes what a full rebuild of the same warehouse publishes, row for row, in every
published relation; and a refused incremental build publishes nothing."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb

from mafiabench.publish import build_warehouse
from mafiabench.transform.build import increment
from mafiabench.warehouse.raw import GRAIN_TABLES, load_records
from support.records import call, cell_records, design, engine_records, fresh_con, mini_record

BOOKKEEPING = {"build_runs", "validation_results", increment.STATE_TABLE}


def _call(i: int, temperature: float) -> dict[str, Any]:
    c = call(i, "fake", "X", inp=100, out=5)
    c["request"] = {"messages": [], "settings": {"temperature": temperature}}
    return c


def _games(prefix: str, n: int, seed: int, *, temperature: float = 0.7) -> list[Any]:
    """Games of every shape the per-game models read: engine games (mini-mafia and classic with beliefs), a
    capability cell with model calls whose settings feed fct_player_games.settings_varied."""
    recs = engine_records(n, seed=seed)
    recs += engine_records(max(1, n // 4), seed=seed + 50, variant="classic",
                           rules={"n_players": 6, "n_mafia": 1, "decision": "belief"})
    recs += cell_records(prefix, n=4, mafia_wins=1, models="X", design=design("homogeneous|X", None, "X", "X"),
                         calls=[_call(0, temperature), _call(1, temperature)], rotate_seats=True)
    return recs


def _published(con: duckdb.DuckDBPyConnection, *, views: bool = True) -> dict[str, Counter[str]]:
    """Every published relation (tables, raw tables included, and views) as a multiset of rows."""
    names = [r[0] for r in con.execute(
        "select table_name from duckdb_tables() where schema_name = 'main' and not temporary union all "
        "select view_name from duckdb_views() where schema_name = 'main' and not internal and not temporary "
        "and ?", [views]
    ).fetchall()]
    assert not [n for n in names if n.startswith("__staged")], "staged relations left behind"
    return {n: Counter(_canonical(r) for r in con.execute(f'select * from main."{n}"').fetchall())
            for n in names if n not in BOOKKEEPING}


def _canonical(value: Any) -> str:
    """A row as text, doubles to 9 significant digits: a sum over the same rows in another order (the published
    tables' rows are in the order they were built, parts appended by each increment; DuckDB's threads) may differ in
    the last bits, and a Python model's fit read from rows in another order (scipy's optimisers) a little more."""
    if isinstance(value, float):
        return f"{value:.9g}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(map(_canonical, value)) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_canonical(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _full_rebuild(con: duckdb.DuckDBPyConnection, tmp: Path) -> dict[str, Counter[str]]:
    """The same warehouse, copied, built whole."""
    con.execute("checkpoint")
    source = con.execute("select path from duckdb_databases() where database_name = current_database()").fetchone()
    assert source is not None
    # A new folder each time, the file named as the test's own (w.duckdb): dbt's parsed project is kept per warehouse
    # name (transform.build.dbt_runner), so another name would cost another parse.
    copy = tmp / f"full-{len(list(tmp.iterdir()))}" / "w.duckdb"
    copy.parent.mkdir()
    shutil.copyfile(source[0], copy)
    other = duckdb.connect(str(copy))
    try:
        result = build_warehouse(other, full_refresh=True)
        assert result.published and all(m.materialized != "incremental" for m in result.models)
        return _published(other)
    finally:
        other.close()


def _assert_same(incremental: dict[str, Counter[str]], full: dict[str, Counter[str]]) -> None:
    assert sorted(incremental) == sorted(full)
    for name in full:
        extra, missing = incremental[name] - full[name], full[name] - incremental[name]
        assert not extra and not missing, f"{name}: rows more {list(extra)[:3]}, rows fewer {list(missing)[:3]}"


def _remove_game(con: duckdb.DuckDBPyConnection, game_id: str) -> None:
    for table in GRAIN_TABLES:
        con.execute(f"delete from {table} where game_id = ?", [game_id])


def test_an_increment_publishes_what_a_full_rebuild_does(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, _games("a", 24, 0))
    first = build_warehouse(con)
    assert first.published and not any(m.materialized == "incremental" for m in first.models)

    # New games (one at another temperature: settings_varied turns true for the published games of model X), a
    # published game replaced by a new record of itself, and a published game removed.
    load_records(con, _games("b", 8, 1, temperature=0.2))
    load_records(con, [mini_record("a-0", models="X", votes={"Alice": "Bob", "Bob": "Alice", "Charlie": "Bob"},
                                   design=design("homogeneous|X", None, "X", "X"),
                                   calls=[_call(0, 0.7)])], replace=True)
    _remove_game(con, "e0-3")
    result = build_warehouse(con)
    assert result.published
    incremental = {m.name for m in result.models if m.materialized == "incremental"}
    assert {"fct_games", "fct_player_games", "int_player_games", "int_decisions",
            "mart_deception_scores"} <= incremental
    published = _published(con)
    landed = con.execute("select count(*) from raw_games").fetchone()
    assert landed is not None and sum(published["fct_games"].values()) == landed[0]
    _assert_same(published, _full_rebuild(con, tmp_path))
    varied = con.execute("select count(*) from fct_player_games where settings_varied").fetchone()
    assert varied is not None and varied[0] > 0  # the case of a rewritten published row is exercised

    # Nothing landed: an empty increment publishes the same marts again.
    again = build_warehouse(con)
    assert any(m.materialized == "incremental" for m in again.models)
    _assert_same(_published(con), published)


def test_a_refused_increment_publishes_nothing_and_the_next_build_catches_up(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, _games("a", 16, 0))
    assert build_warehouse(con).published
    before = _published(con, views=False)  # the staging views read the raw tables: they show what is landed
    raw = {t: before.pop(t) for t in list(before) if t.startswith("raw_")}
    load_records(con, [*_games("b", 6, 2), mini_record("bad", models="X", valid=False, invalid_reason="no votes")])
    refused = build_warehouse(con, max_unusable=0.0, raise_on_failure=False)
    assert not refused.published and any(m.materialized == "incremental" for m in refused.models)
    after = _published(con, views=False)
    assert {t: after.pop(t) for t in list(after) if t.startswith("raw_")} != raw  # the games stay landed
    _assert_same(after, before)
    _remove_game(con, "bad")  # an increment's game removed before it was ever published
    result = build_warehouse(con)
    assert result.published and any(m.materialized == "incremental" for m in result.models)
    _assert_same(_published(con), _full_rebuild(con, tmp_path))


def test_a_changed_project_or_full_refresh_builds_whole(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, _games("a", 4, 0))
    assert build_warehouse(con).published
    load_records(con, _games("b", 2, 3))
    whole = build_warehouse(con, full_refresh=True)
    assert whole.published and not any(m.materialized == "incremental" for m in whole.models)
    load_records(con, _games("c", 2, 4))
    changed = build_warehouse(con, upset_threshold=0.1)  # a var of the project: another build's logic
    assert changed.published and not any(m.materialized == "incremental" for m in changed.models)

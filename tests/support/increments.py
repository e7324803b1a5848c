"""Incremental builds compared with full rebuilds (transform.build.increment): a warehouse's published relations as
multisets of rows, the same warehouse copied and built whole, and the comparison; and games of every shape the
per-game models read."""

from __future__ import annotations

import dataclasses
import functools
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb

from mafiabench.publish import build_warehouse
from mafiabench.record import GameRecord
from mafiabench.transform.build import increment, replay
from mafiabench.warehouse.builds import GRAIN_ROWS_TABLE, UNVACUUMED_TABLE
from mafiabench.warehouse.raw import GRAIN_TABLES
from support.records import call, cell_records, design, engine_records, mini_record

# Not compared (increment.GAMES_TABLE is: an increment's record of the published games must be a full rebuild's).
BOOKKEEPING = {"build_runs", "validation_results", increment.STATE_TABLE, increment.SOURCES_TABLE, replay.TABLE,
               GRAIN_ROWS_TABLE, UNVACUUMED_TABLE}
# Compared in part: GAMES_TABLE's bound is a row number, which a vacuum (a full rebuild's) changes after deletes.
COLUMNS = {increment.GAMES_TABLE: "n_rows, marks"}


def model_call(i: int, temperature: float) -> dict[str, Any]:
    c = call(i, "fake", "X", inp=100, out=5)
    c["request"] = {"messages": [], "settings": {"temperature": temperature}}
    return c


def two_agents(game_id: str, temperatures: tuple[float, float | None], experiment: str = "exp") -> GameRecord:
    """A game of model X (cell `homogeneous|X` of `experiment`) whose two villagers play X through two agents, `a/X`
    at `temperatures[0]` and `b/X` at `temperatures[1]` (None: no call, so no settings): one model in one role with
    two settings in one game, which mart_win_rates counts once per setting, or once, as its study varies settings."""
    calls = []
    for i, (provider, temperature) in enumerate(zip(("a", "b"), temperatures, strict=True)):
        if temperature is not None:
            c = model_call(i, temperature)
            c["provider"], c["player"] = provider, ("Charlie", "Diana")[i]
            calls.append(c)
    rec = mini_record(game_id, models="X", design=design("homogeneous|X", None, "X", "X", experiment), calls=calls)
    agents = {"Charlie": "a/X", "Diana": "b/X"}
    return dataclasses.replace(rec, players=[dataclasses.replace(p, agent=agents.get(p.name, p.agent))
                                             for p in rec.players])


def games(prefix: str, n: int, seed: int, *, temperature: float = 0.7) -> list[Any]:
    """Games of every shape the per-game models read: engine games (mini-mafia and classic with beliefs), a
    capability cell with model calls whose settings feed fct_player_games.settings_varied."""
    recs = engine_records(n, seed=seed)
    recs += engine_records(max(1, n // 4), seed=seed + 50, variant="classic",
                           rules={"n_players": 6, "n_mafia": 1, "decision": "belief"})
    recs += cell_records(prefix, n=4, mafia_wins=1, models="X", design=design("homogeneous|X", None, "X", "X"),
                         calls=[model_call(0, temperature), model_call(1, temperature)], rotate_seats=True)
    return recs


def published(con: duckdb.DuckDBPyConnection, *, views: bool = True) -> dict[str, Counter[str]]:
    """Every published relation (tables, raw tables included, and views) as a multiset of rows."""
    names = [r[0] for r in con.execute(
        "select table_name from duckdb_tables() where schema_name = 'main' and not temporary union all "
        "select view_name from duckdb_views() where schema_name = 'main' and not internal and not temporary "
        "and ?", [views]
    ).fetchall()]
    assert not [n for n in names if n.startswith("__staged")], "staged relations left behind"
    return {n: Counter(_canonical(r) for r in con.execute(f'select {COLUMNS.get(n, "*")} from main."{n}"').fetchall())
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


def full_rebuild(con: duckdb.DuckDBPyConnection, tmp: Path, **options: Any) -> dict[str, Counter[str]]:
    """The same warehouse, copied, built whole (options: those of `build_warehouse`): a first build of its
    `landed_copy`, whole as `--full-refresh` builds. A first build replays the session's record of a first build
    (tests/conftest.py `_machine_records`; a replay publishes what dbt does: test_replay_equals_dbt.py), where
    `--full-refresh`, which never replays, ran dbt every time (about 7 s of the 2-core machine's 9 s per reference);
    its own tests call it (test_incremental_build.py). test_full_rebuild_reference.py checks both."""
    other = landed_copy(con, tmp)
    try:
        result = build_warehouse(other, **options)
        assert result.published and all(m.materialized not in ("incremental", "kept") for m in result.models)
        return published(other)
    finally:
        other.close()


def landed_copy(con: duckdb.DuckDBPyConnection, tmp: Path) -> duckdb.DuckDBPyConnection:
    """A copy of the warehouse with its landed tables (`raw_*`, rows numbered as in the warehouse, as a vacuum left
    them) and any table a test made itself, and nothing a build made (`made_by_a_build`): what a first build finds."""
    con.execute("checkpoint")
    source = con.execute("select path from duckdb_databases() where database_name = current_database()").fetchone()
    assert source is not None
    # A new folder each time, the file named as the test's own (w.duckdb): dbt's parsed project and the replay's
    # records are kept per warehouse name (transform.build.dbt_runner, replay.key), so another name would miss both.
    copy = tmp / f"full-{len(list(tmp.iterdir()))}" / "w.duckdb"
    copy.parent.mkdir()
    shutil.copyfile(source[0], copy)
    other = duckdb.connect(str(copy))
    for kind, name in other.execute(
            "select 'view', view_name from duckdb_views() where schema_name = 'main' and not internal and not "
            "temporary union all select 'table', table_name from duckdb_tables() where schema_name = 'main' and "
            "not temporary order by 1 desc").fetchall():
        if made_by_a_build(name):
            other.execute(f'drop {kind} main."{name}"')
    other.execute("checkpoint")
    return other


def made_by_a_build(name: str) -> bool:
    """Whether a build makes this relation: one of the dbt project's models, the Python models' tables, or the builds'
    own bookkeeping (`build_*`, `BOOKKEEPING`, the price table); anything else in a warehouse (its landed `raw_*`
    tables, a table of the user's) a first build finds as it is."""
    return name.startswith("build_") or name in _models()


@functools.cache
def _models() -> frozenset[str]:
    from mafiabench.transform.build.dbt_runner import resolve_project
    from mafiabench.transform.models import PYTHON_MODELS

    models = {p.stem for p in (resolve_project() / "models").rglob("*.sql")}
    python = {n for step in PYTHON_MODELS for n in (step.name, *step.outputs)}
    return frozenset(models | python | BOOKKEEPING | {"ref_prices"})


def assert_same(incremental: dict[str, Counter[str]], full: dict[str, Counter[str]]) -> None:
    assert sorted(incremental) == sorted(full)
    for name in full:
        extra, missing = incremental[name] - full[name], full[name] - incremental[name]
        assert not extra and not missing, f"{name}: rows more {list(extra)[:3]}, rows fewer {list(missing)[:3]}"


def remove_game(con: duckdb.DuckDBPyConnection, game_id: str) -> None:
    for table in GRAIN_TABLES:
        con.execute(f"delete from {table} where game_id = ?", [game_id])


def kept(result: Any) -> set[str]:
    """The models a build kept (their published relations stand: `materialized` "kept" in its per-model table)."""
    return {m.name for m in result.models if m.materialized == "kept"}

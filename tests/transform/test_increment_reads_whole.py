"""An increment's dbt statements read the published tables keyed by game only for the increment's games, but where a
model is listed in `READS_WHOLE` with why: a new whole read (a model, an edit, a plan DuckDB changed) makes every
scheduled build's cost grow with the warehouse, and would pass unnoticed on a small one. Counted in DuckDB's own
profile of each replayed statement (the rows each table scan produced, after the filters pushed into it), so the check
holds on any machine, at any load."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import pytest

from mafiabench.publish import build_warehouse
from mafiabench.transform.build import replay
from support.gate_increments import copy
from support.query_profile import Operator, operators

# A scan producing at least this share of a table's rows of the published games reads it whole (past the rows of the
# increment's own games, which a raw table holds already: its increment only adds games here).
WHOLE_SHARE = 0.5

# (model or dbt test, published table) -> why an increment reads it whole. The seconds are the model's in an increment
# of 10,000 policy games built on a million (`mafiabench build -v`, 2026-12-02, the 2-core AMD EPYC with a fresh
# clone's CI beside it): tables of a kind those games have none of (model calls, beliefs, statements) are empty there.
_COSTS = "the costs of every game's model calls (fct_model_calls, a view: one home for prices), a table mart"
_STATEMENTS = "every statement's labels and truths, a table mart: its readers list them all"
READS_WHOLE: dict[tuple[str, str], str] = {
    ("fct_player_games", "fct_player_games"):
        "settings_varied: whether each study played a model under more than one setting, from the published "
        "seats' distinct (study, model, settings) beside the increment's (macros/increment.sql)",
    ("mart_belief_fallbacks", "raw_beliefs"): "every belief answer's fallback rate by model, a table mart (0.11 s)",
    ("mart_belief_fallbacks", "raw_games"): "the games of those belief answers (stg_games)",
    ("mart_capability_win_rates", "int_capability_games"): "win rates per capability cell, a table mart (0.06 s)",
    ("mart_cell_costs", "fct_games"): _COSTS + " (0.06 s)",
    ("mart_cell_costs", "raw_model_calls"): _COSTS,
    ("mart_game_costs", "fct_games"): _COSTS + " (0.05 s)",
    ("mart_game_costs", "raw_model_calls"): _COSTS,
    ("not_null_fct_model_calls_game_id", "fct_games"): "dbt's not_null test of the fct_model_calls view",
    ("stg_model_calls", "raw_model_calls"):
        "its delta by game id over every call (raw_replaced_calls beside raw_model_calls), not from the tail",
    ("mart_classic_configurations", "mart_deception_scores"):
        "every classic configuration's deception scores, a table mart (0.06 s)",
    ("mart_exceptional_games", "fct_games"):
        "every game's upset probability from its cell's rates, which the increment changes (0.13 s)",
    ("mart_exceptional_games", "int_game_patterns"): "the same games' patterns",
    ("mart_statement_labels", "fct_games"): _STATEMENTS + " (0.03 s)",
    ("mart_statement_lenses", "fct_games"): _STATEMENTS + ", with the listeners' beliefs (0.15 s)",
    ("mart_statement_lenses", "raw_beliefs"): "the listeners' beliefs around each statement",
    ("mart_statement_lenses", "raw_games"): "the statements' games",
    ("mart_statement_lenses", "raw_players"): "the statements' speakers",
    ("mart_statement_rates", "fct_games"): _STATEMENTS + " (0.06 s)",
    ("mart_strategic_consistency", "fct_player_games"):
        "every classic belief game's consistency per player, a table mart (0.04 s)",
    ("mart_strategic_consistency", "int_belief_consistency"): "the same games' belief pairs",
}


def per_game_tables(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[int, int]]:
    """The published tables keyed by game (raw and built): their rows, and those of the increment's games (landed,
    not yet in fct_games)."""
    names = [r[0] for r in con.execute(
        "select t.table_name from duckdb_tables() t where t.schema_name = 'main' and not t.temporary "
        "and not starts_with(t.table_name, '__') and exists (select 1 from duckdb_columns() c where "
        "c.table_name = t.table_name and c.schema_name = 'main' and c.column_name = 'game_id')").fetchall()]
    added = "select game_id from main.raw_games where game_id not in (select game_id from main.fct_games)"
    out = {}
    for name in names:
        rows, of_added = con.execute(
            f'select count(*), count(*) filter (where game_id in ({added})) from main."{name}"').fetchall()[0]
        out[name] = (int(rows), int(of_added))
    return out


def node_of(sql: str) -> str:
    found = re.search(r'"node_id": "(model|test)\.mafiabench\.([^"]+)"', sql)
    if not found:
        return "(before the models)"
    name = found.group(2)
    return re.sub(r"\.[0-9a-f]{10}$", "", name) if found.group(1) == "test" else name


def whole_reads(path: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> set[tuple[str, str]]:
    """The (model or test, published table) pairs whose scans, in a replayed increment of the warehouse `path`,
    produced `WHOLE_SHARE` of the table's rows of published games or more. A copy built first (dbt runs: the
    machine's records are off) records dbt's statements; a second copy, given those records, replays them."""
    monkeypatch.setenv("MAFIABENCH_REPLAY_CACHE", "0")
    first = copy(path, tmp)
    try:
        recorded = build_warehouse(first)
        assert recorded.published and recorded.replayed == []
        records = replay.load(first).records
    finally:
        first.close()
    con = copy(path, tmp)
    replay.store(con, records)
    profiles: list[tuple[str, list[Operator]]] = []
    execute = replay._execute

    def profiled(cur: duckdb.DuckDBPyConnection, statement: dict[str, Any]) -> Any:
        cur.execute("pragma enable_profiling = 'no_output'")
        got = execute(cur, statement)
        profiles.append((statement["sql"], operators(cur)))
        return got

    monkeypatch.setattr(replay, "_execute", profiled)
    try:
        published = per_game_tables(con)
        result = build_warehouse(con)
        assert result.published and result.replayed == ["run", "test"]
    finally:
        con.close()
    assert len(profiles) > 100 and any(o.table for _, ops in profiles for o in ops)  # the profiles were read
    whole = {t: n - added for t, (n, added) in published.items() if n > added}
    return {(node_of(sql), o.table) for sql, ops in profiles for o in ops
            if o.table in whole and o.rows - published[o.table][1] >= WHOLE_SHARE * whole[o.table]}


def test_an_increment_reads_whole_only_the_tables_listed(landed_increment: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    found = whole_reads(landed_increment, tmp_path, monkeypatch)
    new, gone = sorted(found - set(READS_WHOLE)), sorted(set(READS_WHOLE) - found)
    assert not new, f"an increment now reads these published tables whole (model, table): {new}; read the " \
        "increment's games only (a per_game or summed model, a staging delta), or list each in READS_WHOLE with why"
    assert not gone, f"listed in READS_WHOLE, no longer read whole (take them off the list): {gone}"

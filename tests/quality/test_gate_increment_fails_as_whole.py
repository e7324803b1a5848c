"""A bad row among an added increment's games fails the gate exactly as the whole suites do (quality.delta proves
only a pass): the suite that finds it runs whole, with today's verdict, counts and failing rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from support.gate_increments import assert_same_gate, gate_twice

pytestmark = pytest.mark.slow  # a long file: it starts early (tests/conftest.py), not last

NEW = "(select game_id from raw_games where game_id not in (select game_id from fct_games))"  # the increment's games


def _duplicated_game(con: duckdb.DuckDBPyConnection) -> None:
    # raw_games' primary key would refuse a second row: drop it first, as an older or hand-made warehouse might lack it
    con.execute("create table _g as select * from raw_games; drop table raw_games; alter table _g rename to raw_games")
    con.execute(f"insert into raw_games select * from raw_games where game_id = (select min(game_id) from {NEW})")


def _copied_game(con: duckdb.DuckDBPyConnection) -> None:
    # a published game landed again under a new id: same seed, seats and event log
    for table in ("raw_games", "raw_players", "raw_events", "raw_model_calls"):
        con.execute(f"insert into {table} select * replace ('a-published-game-copied' as game_id) from {table} "
                    "where game_id = (select min(game_id) from raw_games where seed is not null "
                    "and game_id in (select game_id from fct_games))")


CASES: dict[str, tuple[Callable[[duckdb.DuckDBPyConnection], object], str]] = {
    "a seat landed twice": (
        lambda c: c.execute(f"insert into raw_players select * from raw_players "
                            f"where game_id = (select min(game_id) from {NEW}) limit 1"), "raw_players"),
    "an unknown role": (
        lambda c: c.execute(f"update raw_players set role = 'wizard' where game_id = (select min(game_id) from {NEW})"),
        "raw_players"),
    "a blank model name": (
        lambda c: c.execute(f"update raw_players set model = ' ' where game_id = (select max(game_id) from {NEW})"),
        "raw_players"),
    "negative tokens": (
        lambda c: c.execute(f"update raw_model_calls set output_tokens = -7 where game_id in {NEW}"),
        "raw_model_calls"),
    "a belief that does not sum to 1": (
        lambda c: c.execute(f"update raw_beliefs set probability = probability / 2 "
                            f"where game_id = (select min(game_id) from raw_beliefs where game_id in {NEW})"),
        "belief_sums"),
    "a game landed twice": (_duplicated_game, "raw_games"),
    "a game copied under another id": (_copied_game, "copied_games"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_row_in_the_increment_fails_as_the_whole_suite(case: str, landed_increment: Path,
                                                             tmp_path: Path) -> None:
    change, suite = CASES[case]
    got, whole = gate_twice(landed_increment, tmp_path, change)
    assert not got.published and any(m.materialized == "incremental" for m in got.models)
    assert suite in {r.suite for r in got.failures}
    assert suite not in got.proven_suites and "raw_detections" in got.proven_suites
    assert_same_gate(got, whole)

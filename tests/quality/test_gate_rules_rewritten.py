"""Rules rewritten for speed (issue 37) return the rows of the rule as first written, kept here as the reference, on
tables full of edge cases. `mart_ratings_complete` (transform/models/ratings.yml) reads the games counted by line-up
(`int_line_up_counts`, a summed model, made here from the same tables by its own SQL) rather than every seat:
missing teams, roles and models, seats of neither team, a model twice in a game, a game in two studies, unscored
and one-team games, line-ups of unnamed models. `orphan_rows` (raw_games.yml) checks four tables' rows in one stream
against the landed ids: missing ids on either side, one table's orphans, several tables'."""

from __future__ import annotations

import random

import duckdb
import pytest

from mafiabench.transform.models.ratings import LINE_UP_COUNTS_SQL, model_sql
from support.gate import declared_suites

# The rules as first written: the references the declared queries must equal.
REFERENCE = """
with rated as (
    select g.study, g.game_id
    from fct_games g join fct_player_games p using (game_id)
    where g.is_scored and p.team in ('mafia', 'town')
    group by g.study, g.game_id
    having count(distinct p.model) > 1
       and count(*) filter (where p.team = 'mafia') > 0 and count(*) filter (where p.team = 'town') > 0
),
played as (
    select r.study, p.model, count(distinct r.game_id) as games
    from rated r join fct_player_games p using (game_id)
    group by r.study, p.model
)
select played.study, played.model, played.games
from played
left join mart_ratings m on m.study = played.study and m.model = played.model and m.side = 'overall'
where played.games >= 20 and m.model is null
"""


ORPHANS = """
select 'raw_players' as grain_table, game_id, count(*) as n_rows from raw_players
  where game_id not in (select game_id from raw_games) group by all
union all
select 'raw_events', game_id, count(*) from raw_events
  where game_id not in (select game_id from raw_games) group by all
union all
select 'raw_model_calls', game_id, count(*) from raw_model_calls
  where game_id not in (select game_id from raw_games) group by all
union all
select 'raw_beliefs', game_id, count(*) from raw_beliefs
  where game_id not in (select game_id from raw_games) group by all
"""


def _suite(name: str) -> str:
    [suite] = [s for s in declared_suites() if s.name == name]
    return suite.query


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[tuple[object, ...]]) -> None:
    columns = list(zip(*rows, strict=True)) if rows else []
    if columns:
        con.execute(f"insert into {table} select {', '.join(f'unnest(${i + 1})' for i in range(len(columns)))}",
                    [list(c) for c in columns])


def _line_up_counts(con: duckdb.DuckDBPyConnection) -> None:
    """The build's int_line_up_counts over the fixture's fct_games and fct_player_games."""
    con.execute("drop table if exists int_line_up_counts")
    con.execute("create table int_line_up_counts as "
                + model_sql(LINE_UP_COUNTS_SQL, {"fct_games": "fct_games", "fct_player_games": "fct_player_games"}))


def _warehouse(seed: int) -> duckdb.DuckDBPyConnection:
    """fct_games is unique by game id (its dbt test), so a game twice is a game in two studies."""
    rng = random.Random(seed)
    con = duckdb.connect()
    con.execute("create table fct_games (game_id varchar, study varchar, is_scored boolean, valid boolean, "
                "status varchar, mafia_won boolean)")
    con.execute("create table fct_player_games (game_id varchar, team varchar, model varchar, role varchar, "
                "variant varchar)")
    con.execute("create table mart_ratings (study varchar, side varchar, model varchar)")
    games, players = [], []
    for game in [f"g{i}" for i in range(rng.randint(30, 160))] + [None]:
        for study in rng.sample(["s", "t"], k=1 if rng.random() < 0.8 else 2):  # now and then one id twice
            games.append((game, study, rng.choice([True, True, True, False, None]), rng.choice([True, False, None]),
                          rng.choice(["finished", "failed", None]), rng.choice([True, False, None])))
        unnamed = rng.random() < 0.1  # a game whose seats have no model
        players += [(game, rng.choice(["mafia", "town", "town", None, "other"]),
                     None if unnamed else rng.choice(["A", "B", "C", None]),
                     rng.choice(["mafioso", "villager", "detective", "", None]), rng.choice(["classic", None]))
                    for _ in range(rng.randint(1, 5))]
    _insert(con, "fct_games", games)
    _insert(con, "fct_player_games", players)
    _insert(con, "mart_ratings", [(study, rng.choice(["overall", "mafia"]), model) for study in ("s", "t")
                                  for model in rng.sample(["A", "B", "C"], rng.randint(0, 3))])
    _line_up_counts(con)
    return con


@pytest.mark.parametrize("seed", range(40))
def test_the_declared_rule_returns_the_reference_rows(seed: int) -> None:
    """At the threshold of 1 game rather than 20 (the random warehouses are small), so most cases have rows."""
    query = _suite("mart_ratings_complete")
    con = _warehouse(seed)
    declared, reference = (q.replace("played.games >= 20", "played.games >= 1") for q in (query, REFERENCE))
    assert declared != query
    rows = sorted(con.execute(declared).fetchall(), key=repr)
    assert rows == sorted(con.execute(reference).fetchall(), key=repr)
    assert seed % 2 or rows  # rows are compared, not just two empty answers


def test_a_missing_rating_fails_and_twice_in_a_game_counts_once() -> None:
    """By hand: B (mafia) and A (town, twice a game) play 20 games, C (mafia) and D (town, twice) 10: B is the one
    model with 20 games and no rating; D would reach 20 if its two seats counted twice."""
    con = _warehouse(0)
    for table in ("fct_games", "fct_player_games", "mart_ratings"):
        con.execute(f"delete from {table}")
    for i in range(30):
        mafia, town = ("B", "A") if i < 20 else ("C", "D")
        con.execute("insert into fct_games values (?, 's', true, true, 'finished', true)", [f"g{i}"])
        con.execute("insert into fct_player_games values (?, 'mafia', ?, 'mafioso', 'classic'), "
                    "(?, 'town', ?, 'villager', 'classic'), (?, 'town', ?, 'villager', 'classic')",
                    [f"g{i}", mafia, f"g{i}", town, f"g{i}", town])
    con.execute("insert into mart_ratings values ('s', 'overall', 'A')")
    _line_up_counts(con)
    assert con.execute(_suite("mart_ratings_complete")).fetchall() == [("s", "B", 20)]


def test_a_model_of_neither_team_and_a_seat_without_a_model_count() -> None:
    """By hand: 20 rated games of A (mafia) against B (town), each with a seat of neither team held by E and a town
    seat without a model; 20 scored games of unnamed mafia and town seats with F outside both teams (rated by the
    line-up counts, no one's by the rule: no model of either team). A and B are rated: E and the unnamed seats have
    20 games each, F none."""
    con = _warehouse(0)
    for table in ("fct_games", "fct_player_games", "mart_ratings"):
        con.execute(f"delete from {table}")
    for i in range(20):
        con.execute("insert into fct_games values (?, 's', true, true, 'finished', false), "
                    "(?, 's', true, true, 'finished', true)", [f"g{i}", f"u{i}"])
        con.execute("insert into fct_player_games values (?, 'mafia', 'A', 'mafioso', null), "
                    "(?, 'town', 'B', 'villager', null), (?, 'other', 'E', 'villager', null), "
                    "(?, 'town', null, 'villager', null), (?, 'mafia', null, 'mafioso', null), "
                    "(?, 'town', null, 'villager', null), (?, null, 'F', null, null)",
                    [f"g{i}"] * 4 + [f"u{i}"] * 3)
    con.execute("insert into mart_ratings values ('s', 'overall', 'A'), ('s', 'overall', 'B')")
    _line_up_counts(con)
    expected = [("s", "E", 20), ("s", None, 20)]
    assert sorted(con.execute(REFERENCE).fetchall(), key=repr) == expected
    assert sorted(con.execute(_suite("mart_ratings_complete")).fetchall(), key=repr) == expected


@pytest.mark.parametrize("seed", range(12))
def test_the_orphan_rows_rule_returns_the_reference_rows(seed: int) -> None:
    rng = random.Random(seed)
    con = duckdb.connect()
    ids = [f"g{i}" for i in range(8)] + [None]
    landed = rng.sample(ids[:-1], rng.randint(0, 6)) if seed % 6 else [*ids[:4], None]  # a null id: no orphan
    con.execute("create table raw_games (game_id varchar)")
    _insert(con, "raw_games", [(g,) for g in landed])
    for table in ("raw_players", "raw_events", "raw_model_calls", "raw_beliefs"):
        con.execute(f"create table {table} (game_id varchar, x integer)")
        _insert(con, table, [(rng.choice(ids), i) for i in range(rng.randint(0, 30))])
    rows = sorted(con.execute(_suite("orphan_rows")).fetchall(), key=repr)
    assert rows == sorted(con.execute(ORPHANS).fetchall(), key=repr)
    assert bool(rows) == (seed % 6 != 0)  # rows are compared, not just two empty answers

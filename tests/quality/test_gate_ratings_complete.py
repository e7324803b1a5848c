"""The `mart_ratings_complete` suite (transform/models/ratings.yml) groups each (game, model) once for speed: it must
return the rows of the rule as first written, with `count(distinct ...)`, on tables full of edge cases (missing teams
and models, a model twice in a game, a game id twice, unscored and one-team games)."""

from __future__ import annotations

import random

import duckdb
import pytest

from support.gate import declared_suites

# The rule as first written (issue 37 made it cheaper): the reference the declared query must equal.
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


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[tuple[object, ...]]) -> None:
    columns = list(zip(*rows, strict=True)) if rows else []
    if columns:
        con.execute(f"insert into {table} select {', '.join(f'unnest(${i + 1})' for i in range(len(columns)))}",
                    [list(c) for c in columns])


def _warehouse(seed: int) -> duckdb.DuckDBPyConnection:
    rng = random.Random(seed)
    con = duckdb.connect()
    con.execute("create table fct_games (game_id varchar, study varchar, is_scored boolean)")
    con.execute("create table fct_player_games (game_id varchar, team varchar, model varchar)")
    con.execute("create table mart_ratings (study varchar, side varchar, model varchar)")
    games, players = [], []
    for game in [f"g{i}" for i in range(rng.randint(30, 160))] + [None]:
        for study in rng.choices(["s", "t"], k=1 if rng.random() < 0.8 else 2):  # now and then one id twice
            games.append((game, study, rng.choice([True, True, True, False, None])))
        players += [(game, rng.choice(["mafia", "town", "town", None, "other"]), rng.choice(["A", "B", "C", None]))
                    for _ in range(rng.randint(1, 5))]
    _insert(con, "fct_games", games)
    _insert(con, "fct_player_games", players)
    _insert(con, "mart_ratings", [(study, rng.choice(["overall", "mafia"]), model) for study in ("s", "t")
                                  for model in rng.sample(["A", "B", "C"], rng.randint(0, 3))])
    return con


@pytest.mark.parametrize("seed", range(40))
def test_the_declared_rule_returns_the_reference_rows(seed: int) -> None:
    """At the threshold of 1 game rather than 20 (the random warehouses are small), so most cases have rows."""
    [suite] = [s for s in declared_suites() if s.name == "mart_ratings_complete"]
    con = _warehouse(seed)
    declared, reference = (query.replace("played.games >= 20", "played.games >= 1") for query in (suite.query,
                                                                                                     REFERENCE))
    assert declared != suite.query
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
        con.execute("insert into fct_games values (?, 's', true)", [f"g{i}"])
        con.execute("insert into fct_player_games values (?, 'mafia', ?), (?, 'town', ?), (?, 'town', ?)",
                    [f"g{i}", mafia, f"g{i}", town, f"g{i}", town])
    con.execute("insert into mart_ratings values ('s', 'overall', 'A')")
    [suite] = [s for s in declared_suites() if s.name == "mart_ratings_complete"]
    assert con.execute(suite.query).fetchall() == [("s", "B", 20)]

"""The leaderboard's line-ups keyed by numbered seats (`ratings.game_counts`) are the line-ups of the string key it
replaced: each game's seats joined as team, role and model and sorted per game (the query below, as it stood before
issue 36 item 7), on games with mixed teams, special roles, missing and empty roles, mixed variants, self-play,
left-out games and a head-to-head cell whose game ids run past the 500 shown."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from mafiabench.transform.models.ratings import GAME_IDS_PER_PAIR, game_counts

STRING_KEY_SQL = """
create or replace temp table old_games as
with seats as (
    select
        game_id,
        count(*) filter (where team = 'mafia') as n_mafia,
        count(*) filter (where team = 'town') as n_town,
        min(model) filter (where team in ('mafia', 'town')) as min_model,
        max(model) filter (where team in ('mafia', 'town')) as max_model,
        min(model) filter (where team = 'mafia') as mafia_model,
        max(model) filter (where team = 'mafia') as mafia_max,
        min(model) filter (where team = 'town') as town_model,
        max(model) filter (where team = 'town') as town_max,
        array_to_string(list_sort(list(team || chr(31) || coalesce(nullif(role, ''), team) || chr(31) || model)
            filter (where team in ('mafia', 'town'))), chr(30)) as line_up,
        {variant} as variant
    from fct_player_games
    group by game_id
)
select
    g.study, g.game_id, g.mafia_won, s.line_up, s.variant, s.mafia_model, s.town_model,
    s.mafia_model = s.mafia_max and s.town_model = s.town_max as one_model_a_side,
    case when s.n_mafia = 0 or s.n_town = 0 then 'no_teams'
         when g.is_scored and s.min_model = s.max_model then 'self_play'
         when g.is_scored then 'rated'
         when g.valid = false then 'invalid'
         when g.status in ('failed', 'abandoned', 'unfinished') then g.status
         else 'no_winner' end as category
from fct_games as g
inner join seats as s on s.game_id = g.game_id
"""


def _string_key_counts(con: duckdb.DuckDBPyConnection, *, variant: bool) -> dict[str, object]:
    con.execute(STRING_KEY_SQL.format(variant="case when min(variant) = max(variant) then min(variant) end"
                                      if variant else "null"))
    out = {
        "coverage": con.sql("select study, category, count(*) as games from old_games group by all order by all").pl(),
        "self_play": con.sql(
            """select study, mafia_model as model, count(*) as games, count_if(mafia_won)::bigint as mafia_wins,
                      count_if(mafia_won)::double / count(*) as mafia_win_rate
               from old_games where category = 'self_play' group by all order by all"""
        ).pl(),
        "line_ups": con.sql(
            """select study, line_up, count(*) as games, count_if(mafia_won)::bigint as wins
               from old_games where category = 'rated' group by all order by all"""
        ).pl(),
        "pairs": con.sql(
            f"""select study, mafia_model, town_model, count(*) as games, count_if(mafia_won)::bigint as mafia_wins,
                       (list(game_id order by game_id))[1:{GAME_IDS_PER_PAIR}] as game_ids
                from old_games where category = 'rated' and one_model_a_side group by all order by all"""
        ).pl(),
        "variants": dict(
            con.execute(
                """select study, min(variant) from old_games where category = 'rated' group by study
                   having count(distinct variant) = 1 and count(variant) = count(*)"""
            ).fetchall()
        ),
    }
    con.execute("drop table old_games")
    return out


GAMES = "create table fct_games (study varchar, game_id varchar, status varchar, valid boolean, is_scored boolean, " \
        "mafia_won boolean)"
PLAYERS = "create table fct_player_games (game_id varchar, seat integer, team varchar, role varchar, model varchar{})"

# Models whose names are prefixes of each other (the key's order must not depend on the separators), a policy.
MODELS = ["m1", "m10", "m1x", "policy/random", "z"]
ROLES = {"mafia": ["mafioso", "", None], "town": ["detective", "villager", "villager", "", None]}


def _random_warehouse(seed: int, *, variant: bool) -> duckdb.DuckDBPyConnection:
    rng = np.random.default_rng(seed)
    con = duckdb.connect()
    con.execute(GAMES)
    con.execute(PLAYERS.format(", variant varchar" if variant else ""))
    games, players = [], []
    for i in range(600):
        game_id = f"g{int(rng.integers(0, 10**6)):06d}-{i}"
        status = str(rng.choice(["finished", "finished", "finished", "failed", "abandoned", "timeout"]))
        scored = status == "finished" and bool(rng.random() < 0.9)
        valid = None if rng.random() < 0.05 else bool(rng.random() < 0.9)
        games.append((str(rng.choice(["s", "t"])), game_id, status, valid, scored, bool(rng.random() < 0.4)))
        kind = rng.integers(0, 4)  # mixed teams, one model a side, self-play, a side without seats
        mafia_models = rng.choice(MODELS, size=2) if kind == 0 else [MODELS[i % 2]] * 2
        town_models = rng.choice(MODELS, size=3) if kind == 0 else [MODELS[(i + (kind != 2)) % 2]] * 3
        seats = [("mafia", str(rng.choice(ROLES["mafia"])), str(m)) for m in mafia_models[: 1 + i % 2]]
        seats += [] if kind == 3 and i % 3 == 0 else [("town", str(rng.choice(ROLES["town"])), str(m))
                                                      for m in town_models[: 2 + i % 2]]
        for seat, (team, role, model) in enumerate(seats):
            role_value = None if role == "None" else role
            row: tuple[object, ...] = (game_id, seat, team, role_value, model)
            if variant:  # now and then a first seat of another variant, or of none
                other = "mini-mafia" if rng.random() < 0.97 or seat else str(rng.choice(["classic", "None"]))
                row = (*row, None if other == "None" else other)
            players.append(row)
    # A head-to-head cell past the game ids shown, its games split over two line-ups (two and three villagers).
    for i in range(GAME_IDS_PER_PAIR + 100):
        game_id = f"h{(i * 7919) % 1000:04d}"
        games.append(("s", game_id, "finished", True, True, i % 3 == 0))
        seats = [("mafia", "mafioso", "m1")] + [("town", "villager", "m10")] * (2 + i % 2)
        players += [(game_id, k, t, r, m) + (("mini-mafia",) if variant else ()) for k, (t, r, m) in enumerate(seats)]
    for table, rows in (("fct_games", games), ("fct_player_games", players)):
        columns = [c for c, _ in con.execute(f"select column_name, 1 from (describe {table})").fetchall()]
        frame = pl.DataFrame(rows, schema=columns, orient="row")  # noqa: F841 (read by DuckDB by name)
        con.execute(f"insert into {table} select * from frame")
    return con


@pytest.mark.parametrize(("seed", "variant"), [(1, True), (2, True), (3, False)])
def test_numbered_seats_give_the_string_keys_line_ups_counts_and_cells(seed: int, variant: bool) -> None:
    con = _random_warehouse(seed, variant=variant)
    expected = _string_key_counts(con, variant=variant)
    got = game_counts(con)
    for name in ("coverage", "self_play", "line_ups", "pairs"):
        assert_frame_equal(getattr(got, name), expected[name], check_dtypes=False, check_exact=True)
    assert got.variants == expected["variants"]
    # The fixture holds what the key must keep apart and together.
    categories = set(got.coverage["category"].to_list())
    assert {"rated", "self_play", "no_teams", "failed", "invalid"} <= categories
    assert any("detective" in k and "villager" in k for k in got.line_ups["line_up"].to_list())
    assert (got.pairs["games"] > GAME_IDS_PER_PAIR).any()


def test_a_seat_without_a_role_takes_its_side_and_a_detective_is_not_a_villager() -> None:
    con = duckdb.connect()
    con.execute(GAMES)
    con.execute(PLAYERS.format(""))
    con.execute("insert into fct_games values ('s', 'a', 'finished', true, true, true), "
                "('s', 'b', 'finished', true, true, false), ('s', 'c', 'finished', true, true, true)")
    con.execute(
        "insert into fct_player_games values "
        "('a', 0, 'mafia', null, 'X'), ('a', 1, 'town', 'detective', 'Y'), ('a', 2, 'town', 'villager', 'Z'),"
        "('b', 0, 'mafia', '', 'X'), ('b', 1, 'town', 'villager', 'Z'), ('b', 2, 'town', 'detective', 'Y'),"
                "('c', 0, 'mafia', 'mafia', 'X'), ('c', 1, 'town', 'villager', 'Y'), ('c', 2, 'town', 'detective', 'Z')"
    )
    rows = game_counts(con).line_ups.to_dicts()
    assert [(r["line_up"].replace("\x1f", ":").split("\x1e"), r["games"], r["wins"]) for r in rows] == [
        (["mafia:mafia:X", "town:detective:Y", "town:villager:Z"], 2, 1),
        (["mafia:mafia:X", "town:detective:Z", "town:villager:Y"], 1, 1),
    ]

"""The leaderboard's line-up counts (the dbt model `int_line_up_counts`) key a game's line-up by the sum of
2^(seat number x bits) over its seats, a quarter less CPU than the sorted list of seat numbers at a million games,
exact while no seat number occurs 2^bits times in a game: a game with 2^bits seats or more is keyed by the list of its
seat numbers instead. Either way the counts are those of the list key."""

from __future__ import annotations

import duckdb

from mafiabench.transform.models.ratings import LINE_UP_COUNTS_SQL, game_counts, model_sql

REFS = {"fct_games": "fct_games", "fct_player_games": "(select *, null::varchar as variant from fct_player_games)"}


def _warehouse(games: list[tuple[str, bool, list[tuple[str, str, str]]]]) -> duckdb.DuckDBPyConnection:
    """fct_games and fct_player_games of (game id, mafia won, [(team, role, model) per seat])."""
    con = duckdb.connect()
    con.execute("create table fct_games (study varchar, game_id varchar, status varchar, valid boolean, "
                "is_scored boolean, mafia_won boolean)")
    con.execute("create table fct_player_games (game_id varchar, seat integer, team varchar, role varchar, "
                "model varchar)")
    for game_id, won, seats in games:
        con.execute("insert into fct_games values ('s', ?, 'finished', true, true, ?)", [game_id, won])
        con.executemany("insert into fct_player_games values (?, ?, ?, ?, ?)",
                        [[game_id, i, *seat] for i, seat in enumerate(seats)])
    return con


def _listed(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The games the model keys by the list of their seat numbers."""
    sql = model_sql(LINE_UP_COUNTS_SQL, REFS).replace("select * from final", "select game_id from listed_keys")
    return sorted(r[0] for r in con.execute(sql).fetchall())


def _seats(mafia: list[str], town: list[str]) -> list[tuple[str, str, str]]:
    return [("mafia", "mafioso", m) for m in mafia] + [("town", "villager", m) for m in town]


def test_the_summed_key_counts_as_the_list_key() -> None:
    # Three models, two roles: six seat numbers, 21 bits each; line-ups that share seats in other multiplicities.
    games = [
        ("a", True, _seats(["A"], ["B", "B", "C"])),
        ("b", False, _seats(["A"], ["B", "C", "C"])),
        ("c", True, _seats(["A"], ["B", "C", "C"])),
        ("d", False, _seats(["A", "A"], ["B"])),
        ("e", True, _seats(["A"], ["A", "B"])),
        ("f", True, _seats(["C"], ["C", "C", "C"])),  # self-play
    ]
    con = _warehouse(games)
    assert _listed(con) == []  # the summed key held for every game
    got = game_counts(con)
    assert got.line_ups["games"].to_list() == [1, 1, 1, 2]  # d, e, a, then b and c
    assert got.line_ups["wins"].to_list() == [0, 1, 1, 1]
    assert got.self_play["games"].to_list() == [1]


def _overflowing() -> list[tuple[str, bool, list[tuple[str, str, str]]]]:
    models = [f"m{i:02d}" for i in range(42)]
    games = [(f"g{i}", i % 2 == 0, _seats(["X"], [m])) for i, m in enumerate(models)]
    return [*games, ("four", True, _seats(["X"], ["m00"] * 4)), ("one", False, _seats(["X"], ["m01"]))]


def test_a_game_where_a_seat_number_could_overflow_is_keyed_by_the_list() -> None:
    # 43 seat numbers (42 models as villagers, one as mafioso): 127 // 43 = 2 bits a number, so four villagers of
    # one model would carry into the next number: "4 x m00" sums to "1 x m01" (1 << 2 = 4, in m01's bits). The
    # game of five players is keyed by its list; the two-player games keep the summed key.
    con = _warehouse(_overflowing())
    assert _listed(con) == ["four"]
    got = game_counts(con)
    by_line_up = dict(zip(got.line_ups["line_up"].to_list(), got.line_ups["games"].to_list(), strict=True))
    four = "\x1e".join(["mafia\x1fmafioso\x1fX", *["town\x1fvillager\x1fm00"] * 4])
    one = "mafia\x1fmafioso\x1fX\x1etown\x1fvillager\x1fm01"
    assert by_line_up[four] == 1 and by_line_up[one] == 2  # g1 and "one"
    assert sum(by_line_up.values()) == 44

"""The leaderboard keys a game's line-up by the sum of 2^(seat number x bits) over its seats (`ratings.COUNTED_KEY`),
a quarter less CPU than the sorted list of seat numbers at a million games (0.94-1.18 -> 0.70-0.75 CPU s), exact
while no seat number occurs 2^bits times in a game; where one could, `game_counts` counts again by the list
(`LISTED_KEY`). Either way the counts are those of the list key."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest
from polars.testing import assert_frame_equal

from mafiabench.transform.models import ratings
from mafiabench.transform.models.ratings import GameCounts, game_counts
from support.query_profile import ProfiledConnection


def _warehouse(games: list[tuple[str, bool, list[tuple[str, str, str]]]], *, sizes: bool = False
               ) -> duckdb.DuckDBPyConnection:
    """fct_games and fct_player_games of (game id, mafia won, [(team, role, model) per seat]); with `sizes`,
    fct_games.n_players too."""
    con = duckdb.connect()
    con.execute("create table fct_games (study varchar, game_id varchar, status varchar, valid boolean, "
                "is_scored boolean, mafia_won boolean)")
    con.execute("create table fct_player_games (game_id varchar, seat integer, team varchar, role varchar, "
                "model varchar)")
    for game_id, won, seats in games:
        con.execute("insert into fct_games values ('s', ?, 'finished', true, true, ?)", [game_id, won])
        con.executemany("insert into fct_player_games values (?, ?, ?, ?, ?)",
                        [[game_id, i, *seat] for i, seat in enumerate(seats)])
    if sizes:
        con.execute("alter table fct_games add column n_players integer")
        con.execute("update fct_games as g set n_players = (select count(*) from fct_player_games as p "
                    "where p.game_id = g.game_id)")
    return con


def _counts(con: duckdb.DuckDBPyConnection, monkeypatch: Any, *, listed: bool) -> tuple[GameCounts, int]:
    """game_counts, and how many times it counted the games (2: it fell back to the list key)."""
    with monkeypatch.context() as m:
        if listed:
            m.setattr(ratings, "COUNTED_KEY", ratings.LISTED_KEY)
        profiled = ProfiledConnection(con)
        got = game_counts(profiled)  # type: ignore[arg-type]
    return got, sum("with codes as" in q for q, _ in profiled.queries)


def _same(a: GameCounts, b: GameCounts) -> None:
    for name in ("coverage", "self_play", "line_ups", "pairs"):
        assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)
    assert a.variants == b.variants


def _seats(mafia: list[str], town: list[str]) -> list[tuple[str, str, str]]:
    return [("mafia", "mafioso", m) for m in mafia] + [("town", "villager", m) for m in town]


def test_the_summed_key_counts_as_the_list_key(monkeypatch: pytest.MonkeyPatch) -> None:
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
    summed, runs = _counts(con, monkeypatch, listed=False)
    assert runs == 1  # the summed key held: counted once
    listed, _ = _counts(con, monkeypatch, listed=True)
    _same(summed, listed)
    assert summed.line_ups["games"].to_list() == [1, 1, 1, 2]  # d, e, a, then b and c
    assert summed.self_play["games"].to_list() == [1]


def _overflowing() -> list[tuple[str, bool, list[tuple[str, str, str]]]]:
    models = [f"m{i:02d}" for i in range(42)]
    games = [(f"g{i}", i % 2 == 0, _seats(["X"], [m])) for i, m in enumerate(models)]
    return [*games, ("four", True, _seats(["X"], ["m00"] * 4)), ("one", False, _seats(["X"], ["m01"]))]


def test_a_game_where_a_seat_number_could_overflow_is_counted_by_the_list(monkeypatch: pytest.MonkeyPatch) -> None:
    # 43 seat numbers (43 models as villagers, one as mafioso): 127 // 43 = 2 bits a number, so four villagers of
    # one model would carry into the next number: "4 x m00" sums to "1 x m01" (1 << 2 = 4, in m01's bits).
    con = _warehouse(_overflowing())
    got, runs = _counts(con, monkeypatch, listed=False)
    assert runs == 2  # the summed key could not hold: counted again by the list
    listed, _ = _counts(con, monkeypatch, listed=True)
    _same(got, listed)
    by_line_up = dict(zip(got.line_ups["line_up"].to_list(), got.line_ups["games"].to_list(), strict=True))
    four = "\x1e".join(["mafia\x1fmafioso\x1fX", *["town\x1fvillager\x1fm00"] * 4])
    one = "mafia\x1fmafioso\x1fX\x1etown\x1fvillager\x1fm01"
    assert by_line_up[four] == 1 and by_line_up[one] == 2  # g1 and "one"


def test_games_recorded_as_too_large_for_the_summed_key_are_counted_by_the_list_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The same games with their sizes recorded (fct_games.n_players: five players in "four", 2 bits a seat number):
    # one count, by the list, not a summed count thrown away.
    con = _warehouse(_overflowing(), sizes=True)
    got, runs = _counts(con, monkeypatch, listed=False)
    assert runs == 1
    listed, _ = _counts(con, monkeypatch, listed=True)
    _same(got, listed)
    # Sizes that allow the summed key do not prevent it.
    small = _warehouse([("a", True, _seats(["A"], ["B", "B"])), ("b", False, _seats(["B"], ["A", "A"]))], sizes=True)
    assert _counts(small, monkeypatch, listed=False)[1] == 1
    profiled = ProfiledConnection(small)
    game_counts(profiled)  # type: ignore[arg-type]
    assert any("sum(1::hugeint" in q for q, _ in profiled.queries)

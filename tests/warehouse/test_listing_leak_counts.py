"""The listing-order counts (`warehouse.listing_leaks`) rank most games from their seat masks and the rest one
player at a time; both give the order `seat nulls last, name`, and the expected count is the exact sum of the games'
mafia shares. Hand-computed on small warehouses in the raw tables' shape (`warehouse.raw.connect`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mafiabench.warehouse.listing_leaks import DETECTOR, SEATS, listing_leaks
from mafiabench.warehouse.raw import connect


def _warehouse(path: Path, games: dict[str, list[tuple[int | None, str, str]]],
               transcripts: dict[str, list[str]] | None = None):  # type: ignore[no-untyped-def]
    """Finished simulated games of experiment `e`, each a list of (seat, name, team)."""
    con = connect(path)
    for game_id, players in games.items():
        con.execute("insert into raw_games (game_id, source, experiment, status) values (?, 'simulation', 'e', "
                    "'finished')", [game_id])
        con.executemany("insert into raw_players (game_id, seat, name, team) values (?, ?, ?, ?)",
                        [(game_id, *p) for p in players])
    for game_id, listed in (transcripts or {}).items():
        con.execute("insert into raw_detection_transcripts (game_id, cut, players) values (?, 1, ?)",
                    [game_id, listed])
    return con


def test_seats_of_every_layout_list_players_in_seat_then_name_order(tmp_path: Path) -> None:
    """Four 3-player games, one mafioso each, seated differently: 0..2 (mafioso seated 2), 5, 9 and 7 (mafioso on
    7: listed second), no seats (mafioso named "a": listed first), two on seat 1 and one unseated (mafioso "z" on
    seat 1 beside "b": listed second). Position 2 lists the mafioso in 2 games, positions 1 and 3 in one each; the
    detector's listing of game g1 (mafioso listed first) counts apart."""
    con = _warehouse(tmp_path / "w.duckdb", {
        "g1": [(0, "p", "town"), (1, "q", "town"), (2, "r", "mafia")],
        "g2": [(5, "x", "town"), (9, "y", "town"), (7, "m", "mafia")],
        "g3": [(None, "c", "town"), (None, "a", "mafia"), (None, "b", "town")],
        "g4": [(1, "z", "mafia"), (1, "b", "town"), (None, "a", "town")],
    }, {"g1": ["r", "p", "q"]})
    found = {(r.listing, r.position): (r.n, r.mafia, r.expected) for r in listing_leaks(con)}
    assert found == {
        (SEATS, 1): (4, 1, pytest.approx(4 / 3)), (SEATS, 2): (4, 2, pytest.approx(4 / 3)),
        (SEATS, 3): (4, 1, pytest.approx(4 / 3)),
        (DETECTOR, 1): (1, 1, pytest.approx(1 / 3)), (DETECTOR, 2): (1, 0, pytest.approx(1 / 3)),
        (DETECTOR, 3): (1, 0, pytest.approx(1 / 3)),
    }


def test_the_expected_count_is_the_exact_sum_of_the_shares(tmp_path: Path) -> None:
    """Ten games of ten players with one mafioso: the expected count at each seat is 10 x 1/10 = 1 exactly (adding
    the float 0.1 ten times gives 0.9999999999999999)."""
    con = _warehouse(tmp_path / "w.duckdb", {
        f"g{i}": [(seat, f"p{seat}", "mafia" if seat == i else "town") for seat in range(10)] for i in range(10)
    })
    leaks = listing_leaks(con)
    assert [(r.position, r.n, r.mafia) for r in leaks] == [(k, 10, 1) for k in range(1, 11)]
    assert {r.expected for r in leaks} == {1.0}

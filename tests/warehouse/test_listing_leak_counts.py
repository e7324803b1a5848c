"""The listing-order counts (`warehouse.listing_leaks`) rank most games from their seat masks and the rest one
player at a time; both give the order `seat nulls last, name`, and the expected count is the exact sum of the games'
mafia shares. Hand-computed on small warehouses in the raw tables' shape (`warehouse.raw.connect`)."""

from __future__ import annotations

import random
from fractions import Fraction
from pathlib import Path
from typing import Any

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


def _reference(con) -> dict[tuple[str, str, int], tuple[int, int, Fraction]]:  # type: ignore[no-untyped-def]
    """The counting rule read plainly: every player of a finished game listed at its rank in `seat nulls last,
    name` (the detector's listings at their place in each transcript), mafia or not, with its game's mafia share."""
    games = {g: ("simulation:" + (e or "?") if s == "simulation" else s)
             for g, s, e in con.execute("select game_id, source, experiment from raw_games where status = 'finished'")
             .fetchall()}
    players: dict[str, list[tuple[int | None, str, bool]]] = {}
    for g, seat, name, team in con.execute("select game_id, seat, name, team from raw_players").fetchall():
        players.setdefault(g, []).append((seat, name, team == "mafia"))
    listed = {g: sorted(ps, key=lambda p: (p[0] is None, p[0] or 0, p[1])) for g, ps in players.items()}
    out: dict[tuple[str, str, int], list[Any]] = {}

    def count(src: str, listing: str, pos: int, mafia: bool, ps: list[tuple[int | None, str, bool]]) -> None:
        total = out.setdefault((src, listing, pos), [0, 0, Fraction(0)])
        total[0] += 1
        total[1] += mafia
        total[2] += Fraction(sum(p[2] for p in ps), len(ps))

    for g, ps in listed.items():
        if g in games:
            for pos, p in enumerate(ps, start=1):
                count(games[g], SEATS, pos, p[2], ps)
    for g, names in con.execute("select game_id, players from raw_detection_transcripts").fetchall():
        mafia = {p[1]: p[2] for p in players.get(g, [])}
        for pos, name in enumerate(names, start=1):
            if g in games and name in mafia:
                count(games[g], DETECTOR, pos, mafia[name], players[g])
    return {k: (n, k_, e) for k, (n, k_, e) in out.items()}


@pytest.mark.parametrize("seed", range(12))
def test_the_counts_are_the_rule_read_plainly(tmp_path: Path, seed: int) -> None:
    """Random warehouses of every layout: seats 0..62 in any order, seats repeated, out of range (63, -1) or none,
    teams missing, games unfinished, two experiments and an import, now and then a detector's transcript."""
    rng = random.Random(seed)
    con = connect(tmp_path / "w.duckdb")
    for i in range(rng.randint(20, 60)):
        source, experiment = rng.choice([("simulation", "e"), ("simulation", "f"), ("simulation", None),
                                         ("minimafia", None)])
        con.execute("insert into raw_games (game_id, source, experiment, status) values (?, ?, ?, ?)",
                    [f"g{i}", source, experiment, rng.choice(["finished"] * 4 + ["failed"])])
        n = rng.randint(2, 7)
        layout = rng.choice(["seats", "seats", "wide", "none", "repeated", "out"])
        seats: list[int | None] = {
            "seats": rng.sample(range(n + 2), n), "wide": rng.sample(range(63), n), "none": [None] * n,
            "repeated": [rng.randint(0, 2) for _ in range(n)],
            "out": [*rng.sample(range(n + 3), n - 1), rng.choice([63, -1, None])],
        }[layout]
        names = rng.sample("abcdefghij", n)
        con.executemany("insert into raw_players (game_id, seat, name, team) values (?, ?, ?, ?)",
                        [(f"g{i}", s, name, rng.choice(["mafia", "town", "town", None]))
                         for s, name in zip(seats, names, strict=True)])
        if rng.random() < 0.2:
            con.execute("insert into raw_detection_transcripts (game_id, cut, players) values (?, 1, ?)",
                        [f"g{i}", rng.sample(names, n)])
    found = {(r.source, r.listing, r.position): (r.n, r.mafia, r.expected) for r in listing_leaks(con)}
    reference = _reference(con)
    assert found == {k: (n, k_, float(e)) for k, (n, k_, e) in reference.items()}
    assert any(listing == SEATS for _, listing, _ in found)

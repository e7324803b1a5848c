"""The listing-order leak check (issue 35 item 1, `warehouse.listing_leaks`): on human games in the Dallinger
export's real shape (fixture H, `tests/fixtures/datasets/dallinger/4c5d6e7f-…-data`: its two mafia nodes are
created first, as in omonida/mafia-dataset, where the first node is a mafioso in 43 of 43 readable games), copied
under 40 folder names, the seat order fires and the import report says so; the detector's transcripts, which list
the players in a shuffle seeded by game and cut, pass; seeded simulated games pass."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from mafiabench.detect.detection_runs import DetectorSpec, run_detection
from mafiabench.importers import run_import
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.warehouse.listing_leaks import DETECTOR, SEATS, listing_leaks
from mafiabench.warehouse.raw import connect, load_records

H = Path(__file__).parents[1] / "fixtures" / "datasets" / "dallinger" / "4c5d6e7f-8091-a2b3-c4d5-e6f708192a3b-data"
COPIES = 40


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("human")
    for i in range(COPIES):
        shutil.copytree(H, root / "games" / f"{i:08x}-0000-0000-0000-000000000000-data")
    db = root / "w.duckdb"
    con = connect(db)
    report = run_import("dallinger", root / "games", con)
    con.close()
    assert report.valid == COPIES
    run_detection(db, DetectorSpec(models=("policy/random",), sources=("ibraheem2022-human",)))
    return db, report.to_text()


def test_the_raw_order_fires(warehouse: tuple[Path, str]) -> None:
    db, text = warehouse
    con = connect(db)
    seats = {r.position: r for r in listing_leaks(con) if r.listing == SEATS}
    con.close()
    first = seats[1]
    # hand-computed: 9 players, 2 mafia; the first-seated player is mafia in 40 of 40 games, expected 40 * 2/9; the
    # two-sided exact p-value is (2/9)^40 (no lower count is as unlikely: P(0) = (7/9)^40 = 4.3e-5)
    assert (first.n, first.mafia) == (40, 40) and first.expected == pytest.approx(80 / 9)
    assert first.p_value == pytest.approx((2 / 9) ** 40, rel=1e-6) and first.leak
    assert seats[2].leak and seats[2].mafia == 40
    assert "ibraheem2022-human, seats: the player listed at position 1 is mafia in 40 of 40" in text


def test_the_detector_transcripts_pass(warehouse: tuple[Path, str]) -> None:
    db, _ = warehouse
    con = connect(db)
    listed = [r for r in listing_leaks(con) if r.listing == DETECTOR]
    con.close()
    assert {r.position for r in listed} == set(range(1, 10)) and all(r.n == 120 for r in listed)
    assert not [r for r in listed if r.leak]
    assert min(r.p_value for r in listed) > 0.001


def test_seeded_simulated_games_pass(tmp_path: Path) -> None:
    records = [asyncio.run(play_game(GameSpec.build(
        f"sim-{seed}", "classic", {"n_players": 6, "n_mafia": 2, "max_days": 3, "speaking": False}, seed,
        {"default": "scripted/naive"}, design={"experiment": "sim", "cell": "c", "game_index": seed}), BackendPool()))
        for seed in range(60)]
    con = connect(tmp_path / "w.duckdb")
    load_records(con, records)
    leaks = listing_leaks(con)
    con.close()
    assert {r.source for r in leaks} == {"simulation:sim"} and len(leaks) == 6
    assert not [r for r in leaks if r.leak]

"""No position in a detector transcript's list of players gives a role away (issue 35, item 1).

The human games of the Dallinger export create the mafia's nodes first (omonida/mafia-dataset's `node.csv`: in the
44 published games a mafioso is the first node in most), so a record's seat order is a role cue. The fixture is game H
(`tests/fixtures/datasets/dallinger/4c5d6e7f-…-data`, the real export's shape: its two mafia nodes are ids 2 and 3,
first after the source node), copied under 40 folder names as 40 games; the detector's header lists the players in a
shuffle seeded by game and cut, so the first-listed player is mafia about as often as chance (2 of 9).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from scipy.stats import binomtest

from mafiabench.detect.cleansed_transcript import listed_players
from mafiabench.detect.detection_runs import DetectorSpec, GameInput, load_games
from mafiabench.detect.detectors import load_detector_prompt, render_prompt
from mafiabench.importers import run_import
from mafiabench.warehouse.raw import connect

H = Path(__file__).parents[1] / "fixtures" / "datasets" / "dallinger" / "4c5d6e7f-8091-a2b3-c4d5-e6f708192a3b-data"
COPIES = 40


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> list[GameInput]:
    root = tmp_path_factory.mktemp("human")
    for i in range(COPIES):
        shutil.copytree(H, root / f"{i:08x}-0000-0000-0000-000000000000-data")
    con = connect(root / "w.duckdb")
    report = run_import("dallinger", root, con)
    assert report.valid == COPIES
    out = load_games(con, DetectorSpec(sources=("ibraheem2022-human",)))
    con.close()
    return out


def first_listed_mafia(games: list[GameInput], listed: bool) -> tuple[int, int]:
    words = load_detector_prompt("v2").words
    hits = n = 0
    for g in games:
        for cut in g.cuts(None):
            t = g.transcript(cut, words)
            order = t.players if listed else t.seats
            hits += order[0] in g.mafia
            n += 1
    return hits, n


def test_the_raw_order_gives_the_mafia_away(games: list[GameInput]) -> None:
    hits, n = first_listed_mafia(games, listed=False)
    assert (hits, n) == (120, 120)
    assert binomtest(hits, n, 2 / 9).pvalue < 1e-30


def test_the_detector_lists_them_in_a_seeded_shuffle(games: list[GameInput]) -> None:
    hits, n = first_listed_mafia(games, listed=True)
    assert n == 120
    assert binomtest(hits, n, 2 / 9).pvalue > 0.05, hits
    g = games[0]
    t = g.transcript(2, load_detector_prompt("v2").words)
    assert t.players == listed_players(g.game_id, 2, g.players) != g.players
    assert sorted(t.players) == sorted(g.players)
    assert f"The players were: {', '.join(t.players)}." in render_prompt(load_detector_prompt("v2"), t)
    # the same game and cut are listed the same way every time; another cut differently
    assert g.transcript(2, load_detector_prompt("v2").words).players == t.players
    assert g.transcript(1, load_detector_prompt("v2").words).players != t.players

"""A study's pinned game list (`[detector] imported_games`): the detector reads exactly the listed imported games,
valid or not, so a published game set is reproduced whatever the importer's rules decide; a bad list is an error
naming the file and line. With the real human dataset at hand (MAFIABENCH_HUMAN_DATASET = the unzipped
omonida/mafia-dataset folder), the shipped list is checked against the paper's published figures."""

from __future__ import annotations

import math
import os
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from mafiabench.detect.detection_runs import DetectorSpec, load_game_list, load_games, marked_games, run_detection
from mafiabench.errors import UserError
from mafiabench.importers import read_dallinger, run_import
from mafiabench.study.spec import load_experiment
from mafiabench.warehouse.raw import connect

ROOT = Path(__file__).resolve().parents[2]
DALLINGER = ROOT / "tests" / "fixtures" / "datasets" / "dallinger"
PAPER_LIST = ROOT / "experiments" / "hidden_in_plain_text_human_games.txt"
H = "ibraheem2022-human-4c5d6e7f-8091-a2b3-c4d5-e6f708192a3b"
A = "ibraheem2022-human-a1b2c3d4e5f60718293a4b5c6d7e8f90"  # outside the protocol: invalid
B = "ibraheem2022-human-b2c3d4e5f60718293a4b5c6d7e8f90a1"  # a dropout: invalid


@pytest.mark.parametrize(("text", "message"), [
    ("# why\n", "names no game"),
    (f"{H}\n", "does not say why"),
    (f"# why\n{H}\n{H}  # again\n", "line 3: game " + H + " is listed twice"),
    ("# why\nnot an id!\n", "line 2: 'not an id!' is not a game id"),
])
def test_a_bad_game_list_names_the_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "games.txt"
    path.write_text(text)
    with pytest.raises(UserError, match=r"games\.txt") as err:
        load_game_list(path)
    assert message in str(err.value)
    with pytest.raises(UserError, match="game list file not found"):
        load_game_list(tmp_path / "missing.txt")


def test_the_detector_reads_exactly_the_pinned_games_valid_or_not(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    con = connect(path)
    report = run_import("dallinger", DALLINGER, con)
    assert report.valid == 1  # H; A and B are among the invalid
    unpinned = {g.game_id for g in load_games(con, DetectorSpec(sources=("ibraheem2022-human",)))}
    assert unpinned == {H}
    pinned = DetectorSpec(sources=("ibraheem2022-human",), imported_games=(A, H, "ibraheem2022-human-nowhere"))
    assert {g.game_id for g in load_games(con, pinned)} == {A, H}  # B is invalid and not pinned
    con.close()
    result = run_detection(path, pinned.model_copy(update={"models": ("policy/random",)}))
    assert result.pinned_missing == ["ibraheem2022-human-nowhere"]
    assert "1 pinned game(s) not in the warehouse (imported yet?): ibraheem2022-human-nowhere" in result.to_text()
    # A is read because the list pins it, not by the importer's rules: `detect` says so (issue 35 item 4)
    assert (result.pinned, result.pinned_invalid) == (2, 1)
    assert ("of the 2 pinned imported games, 1 are invalid or undecided by the importer's rules and read because the "
            "game list pins them: 1 valid + 1 inferred") in result.to_text()
    con = connect(path)
    read = {g for (g,) in con.execute("select distinct game_id from raw_detections").fetchall()}
    con.close()
    assert read == {A, H}


def test_the_experiment_pins_28_games_inferred_to_match_the_papers(tmp_path: Path) -> None:
    exp = load_experiment(ROOT / "experiments" / "hidden_in_plain_text.toml")
    spec = exp.detector_spec()
    assert spec.imported_games == load_game_list(PAPER_LIST)
    assert len(spec.imported_games) == 28 and all(g.startswith("ibraheem2022-human-") for g in spec.imported_games)
    header = PAPER_LIST.read_text().split("\nibraheem2022", 1)[0]
    for fact in ("28 games", "28/28/23/8", "9.46", "40.29%", "2.64%", "25 valid games", "NOT the paper's set",
                 "Fitting equally well"):
        assert fact in header, fact
    # the 3 the importer's rules exclude are marked, each with its reason (the card and `detect` count them)
    marked = marked_games(PAPER_LIST)
    assert sorted(g[19:27] for g in marked) == ["5e2e10b9", "831be8e5", "907a5898"]
    assert all("by the rules" in why for why in marked.values())
    bad = tmp_path / "exp.toml"
    bad.write_text('name = "x"\nvariant = "async"\n[detector]\nmodels = ["policy/random"]\n'
                   'imported_games = "games.txt"\n')
    (tmp_path / "games.txt").write_text(f"# why\n{H}\n")
    with pytest.raises(UserError, match="no imported source is listed"):
        load_experiment(bad)


REAL = os.environ.get("MAFIABENCH_HUMAN_DATASET")


@pytest.mark.skipif(not REAL, reason="MAFIABENCH_HUMAN_DATASET (the unzipped omonida/mafia-dataset) is not set")
def test_on_the_real_dataset_the_rules_give_25_and_the_pinned_list_the_papers_figures(tmp_path: Path) -> None:
    from mafiabench.detect.cleansed_transcript import day_numbers

    games = {g.game_id: g for g in read_dallinger(str(REAL))}
    assert len(games) == 44
    assert sum(g.validity["valid"] for g in games.values()) == 25
    pinned = [games[g] for g in load_game_list(PAPER_LIST)]
    assert sum(not g.validity["valid"] for g in pinned) == 3
    days = [max(day_numbers(g.events)) for g in pinned]
    assert Counter(days) == {2: 5, 3: 15, 4: 8}  # day cuts 28/28/23/8
    players = [g.rules["n_players"] for g in pinned]
    assert (min(players), max(players), round(sum(players) / 28, 2)) == (7, 12, 9.46)
    single = sum((1 - Fraction(math.comb(n - 2, 2), math.comb(n, 2)) for n in players), Fraction(0)) / 28
    exact = sum((Fraction(1, math.comb(n, 2)) for n in players), Fraction(0)) / 28
    assert abs(float(single) - 0.4029) < 2 * math.sqrt(0.4029 * 0.5971 / 1e6) + 1e-4  # the paper's Monte Carlo
    assert abs(float(exact) - 0.0264) < 2 * math.sqrt(0.0264 * 0.9736 / 1e6) + 1e-4

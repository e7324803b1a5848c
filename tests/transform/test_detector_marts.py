"""The detector marts (metrics.md §8): single and exact match per game and cut, averages per source and day with
Wilson intervals, and the exact random baseline — hand-computed fractions, a Monte Carlo of the real uniform random
detector, and the quality gate refusing broken rows."""

from __future__ import annotations

import asyncio
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pytest

from mafiabench.detect.cleansed_transcript import Transcript
from mafiabench.detect.detectors import PolicyDetector
from mafiabench.quality.gate import run_suites
from mafiabench.transform.models.detector import baseline, detector_tables, transcript_tables, wilson
from mafiabench.warehouse.raw import connect, load_detections
from support.gate import declared_suites

NAMES10 = tuple(f"P{i}" for i in range(10))


def test_baseline_hand_computed_fractions() -> None:
    # n = 10, k = 2: C(10, 2) = 45 pairs; pairs with no mafioso: C(8, 2) = 28, so P(single) = 1 - 28/45 = 17/45.
    assert baseline(10, 2) == (Fraction(17, 45), Fraction(1, 45))
    assert baseline(5, 1) == (Fraction(1, 5), Fraction(1, 5))  # one guess, one mafioso among five
    assert baseline(3, 2) == (Fraction(1), Fraction(1, 3))  # two of three: always hits one of two mafia
    assert baseline(16, 3) == (1 - Fraction(math.comb(13, 3), math.comb(16, 3)), Fraction(1, 560))
    with pytest.raises(ValueError):
        baseline(4, 0)


def test_uniform_random_detector_agrees_with_the_exact_baseline() -> None:
    """The offline `policy/random` detector, run 6,000 times on a 10-player, 2-mafia game: its single- and exact-match
    rates sit within 4 standard errors of 17/45 and 1/45."""
    mafia = {"P3", "P7"}
    detector = PolicyDetector("policy/random")
    draws = 6000
    single = exact = 0
    for i in range(draws):
        t = Transcript(f"mc-{i}", 1, NAMES10, 2, (), ())
        picked = set(asyncio.run(detector.detect(t)).predicted)
        single += bool(picked & mafia)
        exact += picked == mafia
    for hits, p in ((single, Fraction(17, 45)), (exact, Fraction(1, 45))):
        se = math.sqrt(float(p) * (1 - float(p)) / draws)
        assert abs(hits / draws - float(p)) < 4 * se, (hits, draws, p)


def wilson_by_hand(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_wilson_interval_matches_the_formula() -> None:
    for k, n in ((2, 3), (0, 12), (12, 12), (17, 45)):
        lo, hi = wilson(k, n)
        elo, ehi = wilson_by_hand(k, n)
        assert lo == pytest.approx(elo, abs=1e-12) and hi == pytest.approx(ehi, abs=1e-12)
    assert wilson(0, 0) == (None, None)


def hand_warehouse(path: Path) -> duckdb.DuckDBPyConnection:
    """Three games with known mafia and hand-written detections (two cuts for g1 and g2, one for g3)."""
    con = connect(path)
    games = [("g1", "simulation", "exp", 10, ["P3", "P7"]), ("g2", "simulation", "exp", 10, ["P0", "P1"]),
             ("g3", "ibraheem2022-human", "ibraheem2022-human", 5, ["P4"])]
    for gid, source, study, n, mafia in games:
        con.execute("insert into raw_games (game_id, variant, status, source, experiment, valid) values "
                    "(?, 'async', 'finished', ?, ?, true)", [gid, source, study])
        for seat in range(n):
            name = f"P{seat}"
            team = "mafia" if name in mafia else "town"
            con.execute("insert into raw_players (game_id, seat, name, role, team) values (?, ?, ?, ?, ?)",
                        [gid, seat, name, "mafioso" if team == "mafia" else "bystander", team])

    def row(gid: str, cut: int, n: int, predicted: list[str]) -> dict[str, Any]:
        return {"game_id": gid, "cut": cut, "detector": "policy/most-voted", "prompt_sha256": "", "k": len(predicted),
                "n_candidates": n, "predicted": predicted, "format_failure": False, "random_fallback": False,
                "transcript_sha256": f"{gid}-{cut}", "attempts": 0}

    load_detections(con, [
        row("g1", 1, 10, ["P3", "P5"]), row("g1", 2, 10, ["P7", "P3"]),  # day 1: one right; day 2: both
        row("g2", 1, 10, ["P8", "P9"]), row("g2", 2, 10, ["P1", "P2"]),  # day 1: none; day 2: one
        row("g3", 1, 5, ["P4"]),  # the human game's only day: right
    ], [{"game_id": "g1", "cut": 2, "transcript_sha256": "g1-2", "k": 2, "players": list(NAMES10),
         "lines": ["--- Day 1 ---", "P3: hi <b>", "--- Day 2 ---", "Game-Manager: P5 was voted out."]}])
    return con


def test_marts_by_hand(tmp_path: Path) -> None:
    con = hand_warehouse(tmp_path / "w.duckdb")
    tables = detector_tables(con)
    det = {(r["game_id"], r["cut"]): r for r in tables["mart_detections"].to_dicts()}
    assert [(det[k]["n_correct"], det[k]["single_match"], det[k]["exact_match"]) for k in sorted(det)] == [
        (1, True, False), (2, True, True), (0, False, False), (1, True, False), (1, True, True)]
    assert det[("g3", 1)]["baseline_single_fraction"] == "1/5" and det[("g1", 1)]["baseline_exact_fraction"] == "1/45"
    acc = {(r["source"], r["scope"], r["day"]): r for r in tables["mart_detector_accuracy"].to_dicts()}
    sim1 = acc[("simulation", "day", 1)]
    assert (sim1["n_games"], sim1["n_single"], sim1["n_exact"]) == (2, 1, 0)
    sim2 = acc[("simulation", "day", 2)]
    assert (sim2["n_games"], sim2["n_single"], sim2["n_exact"]) == (2, 2, 1)
    game = acc[("simulation", "game", None)]  # each game's last cut: g1 day 2 (exact), g2 day 2 (single)
    assert (game["n_games"], game["n_single"], game["n_exact"]) == (2, 2, 1)
    assert game["baseline_single_fraction"] == "17/45" and game["baseline_exact_fraction"] == "1/45"
    assert (game["single_low"], game["single_high"]) == pytest.approx(wilson_by_hand(2, 2))
    human = acc[("ibraheem2022-human", "game", None)]
    assert human["source_label"] == "human (Dallinger)" and human["n_games"] == 1 and human["exact_rate"] == 1.0
    assert acc[("simulation", "day", 1)]["source_label"] == "LLM (simulated): exp"
    lines = transcript_tables(con)["mart_detector_transcripts"].to_dicts()
    assert [(r["day"], r["line"]) for r in lines][1] == (1, "P3: hi <b>") and lines[-1]["day"] == 2
    con.close()


def test_mixed_baselines_average_exactly(tmp_path: Path) -> None:
    """Over games of different sizes the baseline is the mean of the per-game fractions, kept exact."""
    con = hand_warehouse(tmp_path / "w.duckdb")
    con.execute("update raw_games set source = 'simulation', experiment = 'exp' where game_id = 'g3'")
    acc = {(r["scope"], r["day"]): r for r in detector_tables(con)["mart_detector_accuracy"].to_dicts()}
    day1 = acc[("day", 1)]
    assert day1["n_games"] == 3
    assert day1["baseline_single_fraction"] == str((Fraction(17, 45) * 2 + Fraction(1, 5)) / 3)  # 43/135
    assert day1["baseline_exact_fraction"] == "11/135"
    con.close()


DETECTOR_SUITES = [s for s in declared_suites()
                   if s.name in ("raw_detections", "mart_detections", "mart_detector_accuracy",
                                 "mart_detector_tables")]


def _gate(con: duckdb.DuckDBPyConnection) -> dict[str, bool]:
    for name, frame in {**detector_tables(con), **transcript_tables(con)}.items():
        con.register("_f", frame.to_arrow())
        con.execute(f"create or replace table {name} as select * from _f")
        con.unregister("_f")
    results = run_suites(con, suites=DETECTOR_SUITES)
    assert len(results) > 10
    return {r.rule: r.success for r in results}


def test_gate_passes_good_rows_and_refuses_broken_ones(tmp_path: Path) -> None:
    assert len(DETECTOR_SUITES) == 4
    con = hand_warehouse(tmp_path / "w.duckdb")
    assert all(_gate(con).values())
    con.execute("insert into raw_detections (game_id, cut, detector, prompt_sha256, k, n_candidates, predicted) "
                "values ('g1', 1, 'policy/most-voted', '', 2, 10, ['P3'])")  # a duplicate key with one name
    failed = {rule for rule, ok in _gate(con).items() if not ok}
    assert "a detection is landed once per (game, cut, detector, prompt sha256)" in failed
    assert "detections: exactly k distinct names" in failed
    con.execute("delete from raw_detections where len(predicted) = 1")
    con.execute("insert into raw_detections (game_id, cut, detector, prompt_sha256, k, n_candidates, predicted) "
                "values ('ghost', 1, 'policy/most-voted', '', 1, 5, ['P1'])")
    assert not _gate(con)["detections: every detection belongs to a landed game"]
    con.execute("delete from raw_detections where game_id = 'ghost'")
    # A mart row out of range (as a broken model would write it) fails the accuracy suite.
    _gate(con)
    con.execute("update mart_detector_accuracy set single_rate = 1.5 where scope = 'game'")
    results = {r.rule: r.success for r in run_suites(con, suites=DETECTOR_SUITES)}
    assert not results["detector accuracy: single_rate is within [0, 1]"]
    assert not results["detector accuracy: each rate inside its interval, exact <= single (baseline too)"]
    # An Average row that does not pool its day rows fails the tables suite, alone.
    _gate(con)
    con.execute("update mart_detector_tables set n_single = n_single - 1 where row_label = 'Average' "
                "and source = 'simulation'")
    results = {r.rule: r.success for r in run_suites(con, suites=DETECTOR_SUITES)}
    assert not results["detector tables: exact <= single <= transcripts, and the Average row pools the day rows"]
    assert results["detector tables: single_rate is within [0, 1]"]
    con.close()


def test_paper_tables_by_hand(tmp_path: Path) -> None:
    """Tables II/III rows: a row per day with its transcripts, the pooled Average over every cut of the source, the
    per-row exact baseline and the source's baseline pooled over its cuts."""
    con = hand_warehouse(tmp_path / "w.duckdb")
    rows = {(r["source"], r["row_label"]): r for r in detector_tables(con)["mart_detector_tables"].to_dicts()}
    assert sorted(rows) == [("ibraheem2022-human", "1"), ("ibraheem2022-human", "Average"),
                            ("simulation", "1"), ("simulation", "2"), ("simulation", "Average")]
    counts = {k: (r["day"], r["n_transcripts"], r["n_games"], r["n_single"], r["n_exact"]) for k, r in rows.items()}
    assert counts[("simulation", "1")] == (1, 2, 2, 1, 0)
    assert counts[("simulation", "2")] == (2, 2, 2, 2, 1)
    assert counts[("simulation", "Average")] == (None, 4, 2, 3, 1)  # g1 and g2, two cuts each, pooled
    average = rows[("simulation", "Average")]
    assert (average["single_rate"], average["exact_rate"]) == (0.75, 0.25)
    assert average["source_baseline_single_fraction"] == "17/45" and average["source_baseline_exact_fraction"] == "1/45"
    assert rows[("ibraheem2022-human", "1")]["source_baseline_single_fraction"] == "1/5"
    # Games of different sizes in one source (g1, g2: n = 10, two cuts each; g3: n = 5, one cut): the source's
    # baseline counts each game once, as the paper's simulation guessed per game; the Average row's own baseline
    # pools its cuts.
    con.execute("update raw_games set source = 'simulation', experiment = 'exp' where game_id = 'g3'")
    rows = {r["row_label"]: r for r in detector_tables(con)["mart_detector_tables"].to_dicts()}
    per_game = (Fraction(17, 45) * 2 + Fraction(1, 5)) / 3  # 43/135
    pooled = (Fraction(17, 45) * 4 + Fraction(1, 5)) / 5  # 77/225
    assert {r["source_baseline_single_fraction"] for r in rows.values()} == {str(per_game)}
    exact = (Fraction(1, 45) * 2 + Fraction(1, 5)) / 3
    assert {r["source_baseline_exact_fraction"] for r in rows.values()} == {str(exact)}
    assert rows["Average"]["baseline_single_fraction"] == str(pooled)
    assert rows["1"]["baseline_single_fraction"] == str(per_game)
    con.close()


def test_paper_tables_reproduce_the_published_human_average(tmp_path: Path) -> None:
    """Hidden in Plain Text, Table II/III, human transcripts: days 1-4 of 28/28/23/8 transcripts with 13/16/17/5
    single and 3/3/4/1 exact matches (46.43%, 57.14%, 73.91%, 62.50%; 10.71%, 10.71%, 17.39%, 12.50%) pool into
    the printed Average row: (87) 58.62% and 12.64%."""
    con = connect(tmp_path / "w.duckdb")
    lengths = [2] * 5 + [3] * 15 + [4] * 8
    hits = {1: (13, 3), 2: (16, 3), 3: (17, 4), 4: (5, 1)}
    seen = {d: 0 for d in hits}
    rows = []
    for i, days in enumerate(lengths):
        gid = f"h{i:02d}"
        con.execute("insert into raw_games (game_id, variant, status, source, experiment, valid) values "
                    "(?, 'async', 'finished', 'ibraheem2022-human', 'ibraheem2022-human', true)", [gid])
        for seat in range(10):
            con.execute("insert into raw_players (game_id, seat, name, role, team) values (?, ?, ?, ?, ?)",
                        [gid, seat, f"P{seat}", *(("mafioso", "mafia") if seat < 2 else ("bystander", "town"))])
        for cut in range(1, days + 1):
            k = seen[cut]
            seen[cut] += 1
            single, exact = hits[cut]
            predicted = ["P0", "P1"] if k < exact else ["P0", "P5"] if k < single else ["P5", "P6"]
            rows.append({"game_id": gid, "cut": cut, "detector": "d", "prompt_sha256": "", "k": 2, "n_candidates": 10,
                         "predicted": predicted, "format_failure": False, "random_fallback": False,
                         "transcript_sha256": f"{gid}-{cut}", "attempts": 0})
    load_detections(con, rows, [])
    table = {r["row_label"]: r for r in detector_tables(con)["mart_detector_tables"].to_dicts()}
    printed = {"1": (28, "46.43", "10.71"), "2": (28, "57.14", "10.71"), "3": (23, "73.91", "17.39"),
               "4": (8, "62.50", "12.50"), "Average": (87, "58.62", "12.64")}
    got = {label: (r["n_transcripts"], f"{100 * r['single_rate']:.2f}", f"{100 * r['exact_rate']:.2f}")
           for label, r in table.items()}
    assert got == printed
    con.close()


def test_table_one_over_the_games_a_detector_read(tmp_path: Path) -> None:
    """Table I of the real-shaped human game H (9 players, 3 day cuts, 9 public day messages of 27 words)."""
    from mafiabench.detect.detection_runs import DetectorSpec, run_detection
    from mafiabench.importers import run_import

    path = tmp_path / "w.duckdb"
    con = connect(path)
    run_import("dallinger", Path(__file__).parents[1] / "fixtures" / "datasets" / "dallinger" /
               "4c5d6e7f-8091-a2b3-c4d5-e6f708192a3b-data", con)
    con.close()
    run_detection(path, DetectorSpec(models=("policy/random",)))
    con = connect(path)
    (row,) = detector_tables(con)["mart_detector_datasets"].to_dicts()
    con.close()
    assert row == {"source": "ibraheem2022-human", "study": "ibraheem2022-human", "source_label": "human (Dallinger)",
                   "n_games": 1, "participants_max": 9, "participants_mean": 9.0, "participants_min": 9,
                   "days_max": 3, "days_mean": 3.0, "days_min": 3, "share_at_most_3_days": 1.0,
                   "utterances_per_game": 9.0, "words_per_utterance": 3.0,
                   "game_set": "read", "game_set_label": "1 game valid by the importer's rules"}

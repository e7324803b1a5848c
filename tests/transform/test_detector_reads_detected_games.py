"""The detector's marts read the players and events of the games a detector read, not every game of the warehouse:
a million simulated games without detections cost the build 0.3-0.4 s of scans and aggregates for empty marts
before (issue 37). Same rows either way (test_detector_marts.py); here, what DuckDB did."""

from __future__ import annotations

from pathlib import Path

import duckdb

from mafiabench.transform.models.detector import dataset_rows, detection_rows
from mafiabench.warehouse.raw import connect, load_detections
from support.query_profile import ProfiledConnection

UNREAD = 300  # games no detector read, four players and a public message each


def warehouse(path: Path, *, detected: bool) -> duckdb.DuckDBPyConnection:
    con = connect(path)
    con.execute("""insert into raw_games (game_id, variant, status, source, experiment, valid)
                   select 'u' || i, 'async', 'finished', 'simulation', 'exp', true from range(?) as r(i)""", [UNREAD])
    con.execute("""insert into raw_players (game_id, seat, name, role, team)
                   select 'u' || i, s, 'P' || s, case when s = 0 then 'mafioso' else 'bystander' end,
                          case when s = 0 then 'mafia' else 'town' end
                   from range(?) as r(i), range(4) as t(s)""", [UNREAD])
    con.execute("""insert into raw_events (game_id, seq, type, phase, visibility, text)
                   select 'u' || i, 1, 'message', 'day', 'public', 'hello there' from range(?) as r(i)""", [UNREAD])
    if detected:
        con.execute("insert into raw_games (game_id, variant, status, source, experiment, valid) values "
                    "('d1', 'async', 'finished', 'simulation', 'exp', true)")
        for seat in range(4):
            con.execute("insert into raw_players (game_id, seat, name, role, team) values ('d1', ?, ?, ?, ?)",
                        [seat, f"P{seat}", "mafioso" if seat == 1 else "bystander", "mafia" if seat == 1 else "town"])
        load_detections(con, [{"game_id": "d1", "cut": 1, "detector": "policy/random", "prompt_sha256": "", "k": 1,
                               "n_candidates": 4, "predicted": ["P1"], "format_failure": False,
                               "random_fallback": False, "transcript_sha256": "d1-1", "attempts": 0}], [])
    return con


def test_the_real_mafia_are_gathered_for_the_detected_games_only(tmp_path: Path) -> None:
    con = ProfiledConnection(warehouse(tmp_path / "w.duckdb", detected=True))
    rows = detection_rows(con)  # type: ignore[arg-type]
    assert [(r["game_id"], r["mafia"], r["exact_match"]) for r in rows] == [("d1", ["P1"], True)]
    # No aggregate takes in more than the detected game's rows (before: every game's mafioso, 301 rows).
    assert con.aggregated() <= 4


def test_without_detections_table_one_reads_no_event(tmp_path: Path) -> None:
    con = ProfiledConnection(warehouse(tmp_path / "w.duckdb", detected=False))
    assert dataset_rows(con) == []  # type: ignore[arg-type]
    assert detection_rows(con) == []  # type: ignore[arg-type]
    assert con.scanned("raw_events") == 0 and con.aggregated() == 0
    assert not any(o.table == "raw_events" for o in con.operators())

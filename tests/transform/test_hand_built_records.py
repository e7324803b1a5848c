"""The hand-built game records of tests/support/records.py land like engine games, so the expectations of the SQL
and mart tests built on them are about real log shapes."""

from __future__ import annotations

from support.records import cell_records, engine_records, landed, mini_record, rows

# -- the helpers' own checks ------------------------------------------------------------------------------------


def test_hand_built_game_lands_like_an_engine_game() -> None:
    hand = mini_record("h1", messages=[("Bob", "Alice is the mafioso"), ("Alice", None)])
    engine = engine_records(1)[0]
    c = landed([hand, engine], only=["stg_events", "int_game_checks"])
    # Same event types in the same phases, and both pass every per-game check.
    types = rows(c, "select game_id, list(event_type order by seq) as t from stg_events group by game_id order by 1")
    assert types[0]["t"][:8] == types[1]["t"][:8]
    checks = rows(c, "select * from int_game_checks order by game_id")
    for r in checks:
        assert r["one_winner_ok"] and r["composition_ok"] and r["seq_defects"] == 0 and r["n_invalid_votes"] == 0


def test_cell_records_counts() -> None:
    recs = cell_records("c", n=5, mafia_wins=3, tie_wins=1, models="m")
    assert [r.winner for r in recs] == ["mafia", "mafia", "mafia", "town", "town"]
    assert [r.outcome["tie_decided"] for r in recs] == [True, False, False, False, False]

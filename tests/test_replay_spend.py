"""A failed game replayed that fails again: the raw file and the warehouse hold the same latest record, and every
attempt's calls stay counted (the replaced attempt's in `raw_replaced_calls` and under `raw/.../replaced/`), so the
budget never under-counts what was spent."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import duckdb

from mafiabench.study.run import run_study
from mafiabench.study.spec import parse_experiment
from mafiabench.warehouse import landing
from mafiabench.warehouse.raw import connect


def test_a_replay_that_fails_again_keeps_both_places_consistent_and_counts_every_attempt(tmp_path: Path) -> None:
    exp = parse_experiment(
        {
            "name": "refail",
            "games_per_cell": 3,
            "cells": [{"name": "c", "agents": {"mafioso": "broken/m", "default": "policy/random"}}],
            "endpoints": {"broken": {"kind": "fake", "options": {"p_server_error": 1.0}}},
            "models": {"default": {"max_attempts": 2, "backoff_base_s": 0.0}},
            "warehouse": str(tmp_path / "w.duckdb"),
        },
        "<test>",
    )
    first = asyncio.run(run_study(exp, progress=False))
    second = asyncio.run(run_study(exp, progress=False))
    assert first.games_failed == second.games_failed == second.games_played == 3
    assert first.status == second.status == "failed" and first.exit_code == 1
    assert first.usage.calls > 0 and second.usage.calls > 0

    folder = landing.raw_dir(Path(exp.warehouse), exp.name)
    con = duckdb.connect(exp.warehouse, read_only=True)
    try:
        shas = dict(con.execute("select game_id, record_sha256 from raw_games").fetchall())
        (latest_calls,) = con.execute("select count(*) from raw_model_calls").fetchone()  # type: ignore[misc]
        (old_calls,) = con.execute("select count(*) from raw_replaced_calls").fetchone()  # type: ignore[misc]
    finally:
        con.close()
    files = landing.raw_files(folder)
    assert set(files) == set(shas)
    for game_id, path in files.items():  # the raw file IS the landed record
        assert hashlib.sha256(path.read_bytes()).hexdigest() == shas[game_id]
    assert latest_calls == second.usage.calls and old_calls == first.usage.calls
    assert len(list((folder / landing.REPLACED_DIR).glob("*.json"))) == 3
    con = connect(exp.warehouse)
    try:
        spent = sum(n for _, _, n, *_ in landing.usage_by_model(con, exp.name))
        # the same records loaded again (a resume reading the raw folder) change nothing
        again = landing.land_files(con, files.values())
        (old_again,) = con.execute("select count(*) from raw_replaced_calls").fetchone()  # type: ignore[misc]
    finally:
        con.close()
    assert spent == first.usage.calls + second.usage.calls
    assert again.skipped == 3 and old_again == old_calls

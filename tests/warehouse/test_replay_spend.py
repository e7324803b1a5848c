"""A failed game replayed that fails again: the raw file and the warehouse hold the same latest record, and every
attempt's calls stay counted (the replaced attempt's in `raw_replaced_calls` and in its own, older shard file), so
the budget never under-counts what was spent."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import duckdb

from mafiabench.study.run import run_study
from mafiabench.study.spec import parse_experiment
from mafiabench.transform.build.marts import build_models
from mafiabench.warehouse import landing
from mafiabench.warehouse.raw import connect, load_encoded


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
    latest = landing.raw_records(folder)
    assert set(latest) == set(shas)
    for game_id, line in latest.items():  # the latest stored record IS the landed record
        assert hashlib.sha256(line).hexdigest() == shas[game_id]
    assert latest_calls == second.usage.calls and old_calls == first.usage.calls
    history = list(landing.raw_history(folder))  # both attempts of each game stay on disk
    assert len(history) == 6 and {g for g, _ in history} == set(shas)
    con = connect(exp.warehouse)
    try:
        spent = sum(n for _, _, n, *_ in landing.usage_by_model(con, exp.name))
        # the same records loaded again (a resume reading the raw folder) change nothing
        entries = [(landing.read_record(line).to_dict(), line) for line in latest.values()]
        again = load_encoded(con, entries)
        (old_again,) = con.execute("select count(*) from raw_replaced_calls").fetchone()  # type: ignore[misc]
    finally:
        con.close()
    assert spent == first.usage.calls + second.usage.calls
    assert again.skipped == 3 and old_again == old_calls


def test_the_cost_marts_count_the_calls_and_tokens_of_every_attempt(tmp_path: Path) -> None:
    """Faults fixed per request (`seed`): a failed game's replay makes the same calls and fails at the same one, so
    both attempts spent tokens; the cost marts (per game and per cell) count both, as the raw tables hold them."""
    exp = parse_experiment(
        {
            "name": "refail-tokens",
            "games_per_cell": 8,
            "cells": [{"name": "c", "agents": {"mafioso": "flaky/m", "default": "policy/random"}}],
            "endpoints": {"flaky": {"kind": "fake", "options": {"p_server_error": 0.4, "seed": 3}}},
            "models": {"default": {"max_attempts": 1, "backoff_base_s": 0.0}},
            "warehouse": str(tmp_path / "w.duckdb"),
        },
        "<test>",
    )
    first = asyncio.run(run_study(exp, progress=False))
    second = asyncio.run(run_study(exp, progress=False))
    assert 0 < first.games_failed < 8 and second.games_played == second.games_failed == first.games_failed

    con = connect(exp.warehouse)
    try:
        latest, replaced = (
            con.execute(f"select count(*), sum(input_tokens + output_tokens) from {table}").fetchone()
            for table in ("raw_model_calls", "raw_replaced_calls")
        )
        assert replaced is not None and replaced[0] > 0 and replaced[1] > 0  # the replaced attempts spent tokens
        build_models(con, only=["mart_game_costs", "mart_cell_costs"])
        per_game = con.execute(
            "select sum(n_calls), sum(n_replaced_calls), sum(total_tokens) from mart_game_costs"
        ).fetchone()
        per_cell = con.execute(
            "select sum(n_calls), sum(n_replaced_calls), sum(input_tokens + output_tokens) from mart_cell_costs"
        ).fetchone()
        failed_game = con.execute(
            """select g.n_calls, g.n_replaced_calls, g.total_tokens, r.tokens
               from mart_game_costs g
               join (select game_id, sum(input_tokens + output_tokens) as tokens from raw_replaced_calls
                     group by game_id) r using (game_id)
               limit 1"""
        ).fetchone()
    finally:
        con.close()
    assert latest is not None and latest[0] > 0
    assert per_game == per_cell == (latest[0] + replaced[0], replaced[0], latest[1] + replaced[1])
    assert per_game[0] == first.usage.calls + second.usage.calls  # every call either run made
    # one failed game: its calls are its two attempts', the same calls made twice (faults fixed per request)
    assert failed_game is not None
    n_calls, n_replaced, tokens, replaced_tokens = failed_game
    assert n_calls == 2 * n_replaced and tokens == 2 * replaced_tokens

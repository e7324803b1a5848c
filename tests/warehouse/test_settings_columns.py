"""Settings as columns (issue 29 item 6): the temperature, token caps and reasoning effort each call was sent with
are typed columns from landing on (raw_model_calls), carried with the game's prompt version and hash to each call
(fct_model_calls) and each seat (fct_player_games); a study that plays a model under two temperatures gets a
win-rate row per temperature, a study that does not keeps its one row."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from mafiabench import publish
from mafiabench.study.design import cell_fingerprint, expand_cells
from mafiabench.study.run import run_study
from mafiabench.study.spec import Experiment, parse_experiment

GAMES = 4


def experiment(tmp: Path, name: str, temperatures: list[float]) -> Experiment:
    """Mini-Mafia with the fake model in every seat; one cell per temperature, the cells differing in nothing else."""
    return parse_experiment({
        "name": name,
        "variant": "mini-mafia",
        "games_per_cell": GAMES,
        "models": {"default": {"reasoning_effort": "minimal"}},
        "cells": [
            {"name": f"t{t}", "agents": {"default": "fake/m"}, "models": {"default": {"temperature": t}}}
            for t in temperatures
        ],
        "warehouse": str(tmp / "w.duckdb"),
    })


def rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    tmp = tmp_path_factory.mktemp("settings")
    varied = experiment(tmp, "varied", [0.2, 0.9])
    same = experiment(tmp, "same", [0.5])
    for exp in (varied, same):
        summary = asyncio.run(run_study(exp, progress=False))
        assert summary.games_played == GAMES * len(exp.cells) and summary.games_failed == 0
    publish.build(tmp / "w.duckdb")
    con = duckdb.connect(str(tmp / "w.duckdb"), read_only=True)
    yield con
    con.close()


def test_each_call_lands_the_settings_it_was_sent_with(built: duckdb.DuckDBPyConnection) -> None:
    calls = rows(built, "select game_id, action, temperature, max_tokens, reasoning_effort, request_json "
                        "from raw_model_calls")
    assert len(calls) > 3 * GAMES * 3
    for c in calls:
        sent = json.loads(c["request_json"])["settings"]
        assert (c["temperature"], c["max_tokens"], c["reasoning_effort"]) == (
            sent["temperature"], sent["max_tokens"], sent["reasoning_effort"])
        cell_temperature = {"varied.t0.2": 0.2, "varied.t0.9": 0.9, "same.t0.5": 0.5}
        assert c["temperature"] == next(t for k, t in cell_temperature.items() if c["game_id"].startswith(k))
        assert c["max_tokens"] == (55 if c["action"] == "speak" else 5)  # the Mini-Mafia caps
        assert c["reasoning_effort"] == "minimal"


def test_calls_and_seats_carry_the_prompt_version_and_hash_of_their_game(built: duckdb.DuckDBPyConnection) -> None:
    off = built.execute("""select count(*) from fct_model_calls c join fct_games g using (game_id)
                           where c.prompt_sha256 is distinct from g.prompt_sha256
                              or c.prompt_version is distinct from g.prompt_version""").fetchone()
    assert off == (0,)
    seats = rows(built, """select p.*, g.prompt_sha256 as game_sha from fct_player_games p join fct_games g
                           using (game_id)""")
    assert len(seats) == 4 * GAMES * 3 and all(s["prompt_sha256"] == s["game_sha"] is not None for s in seats)
    for s in seats:
        assert (s["max_tokens_message"], s["max_tokens_other"], s["reasoning_effort"]) == (55, 5, "minimal")
        assert s["model_settings"] == f"temperature {s['temperature']}, max_tokens 55/5, reasoning_effort minimal"
        assert s["settings_varied"] == (s["study"] == "varied")


def test_a_study_varying_temperature_gets_a_row_per_temperature(built: duckdb.DuckDBPyConnection) -> None:
    got = rows(built, """select w.value, w.model_settings, w.n from mart_win_rates w
                         where w.dimension = 'model_as_mafioso' order by w.model_settings""")
    assert [r["value"] for r in got] == ["fake/m"] * 3
    # the unvaried study's games under '' (today's row), the varied study's under each temperature
    assert [(r["model_settings"], r["n"]) for r in got] == [
        ("", GAMES),
        ("temperature 0.2, max_tokens 55/5, reasoning_effort minimal", GAMES),
        ("temperature 0.9, max_tokens 55/5, reasoning_effort minimal", GAMES),
    ]
    game_rows = built.execute("select count(*) from mart_win_rates where dimension = 'study' "
                              "and model_settings <> ''").fetchone()
    assert game_rows == (0,)  # game-level groupings are not split


def test_a_cell_of_other_settings_is_another_cell(tmp_path: Path) -> None:
    """The cell's own settings are part of what its games are: its fingerprint changes with them."""
    a, b = (expand_cells(experiment(tmp_path, "x", [t]))[0] for t in (0.2, 0.9))
    fa = cell_fingerprint(experiment(tmp_path, "x", [0.2]), a)
    fb = cell_fingerprint(experiment(tmp_path, "x", [0.9]), b)
    assert fa["models"]["fake/m"]["temperature"] == 0.2 and fb["models"]["fake/m"]["temperature"] == 0.9

"""A study's identity is its content: a cell changed under the same name is never silently skipped on resume, and
the prompt hash covers every word a model can be shown (template files and the code that writes prompt text)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import duckdb
import pytest

from mafiabench.errors import UserError
from mafiabench.study.run import run_study
from mafiabench.study.spec import Experiment, parse_experiment


def experiment(tmp_path: Path, **over: Any) -> Experiment:
    data: dict[str, Any] = {
        "name": "identity",
        "games_per_cell": 3,
        "cells": [
            {"name": "policies", "agents": {"default": "policy/random"}},
            {"name": "naive", "agents": {"default": "scripted/naive"}},
        ],
        "rules": {"discussion_rounds": 2},
        "models": {"scripted/naive": {"temperature": 0.0, "max_attempts": 3}},
        "warehouse": str(tmp_path / "w.duckdb"),
    }
    data.update(over)
    return parse_experiment(data)


def play(exp: Experiment) -> Any:
    return asyncio.run(run_study(exp, progress=False))


def landed(exp: Experiment) -> list[tuple[str, str]]:
    con = duckdb.connect(exp.warehouse, read_only=True)
    try:
        return con.execute("select cell, rules_json from raw_games order by game_id").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"rules": {"discussion_rounds": 3}}, "rules.discussion_rounds: 2 → 3"),
        ({"models": {"scripted/naive": {"temperature": 0.7, "max_attempts": 3}}},
         "models.scripted/naive.temperature: 0.0 → 0.7"),
        ({"models": {"scripted/naive": {"temperature": 0.0, "max_tokens_message": 80}}},
         "models.scripted/naive.max_tokens_message: 55 → 80"),
        ({"prompt_version": "v4.1-condensed"},
         "prompt.version: 'mini-mafia/v4.1-full' → 'mini-mafia/v4.1-condensed'"),
    ],
)
def test_a_changed_cell_is_a_clear_error_naming_what_changed(
    tmp_path: Path, change: dict[str, Any], named: str
) -> None:
    first = play(experiment(tmp_path))
    assert first.games_played == 6
    before = landed(experiment(tmp_path))
    with pytest.raises(UserError) as err:
        play(experiment(tmp_path, **change))
    assert named in str(err.value) and "new name" in str(err.value)
    assert landed(experiment(tmp_path)) == before  # nothing landed, nothing replaced


def test_changed_rules_touch_every_cell_and_each_is_named(tmp_path: Path) -> None:
    play(experiment(tmp_path))
    with pytest.raises(UserError, match=r"2 cell\(s\) changed.*'policies'.*'naive'"):
        play(experiment(tmp_path, rules={"discussion_rounds": 1}))


def test_delivery_settings_and_more_games_resume_as_before(tmp_path: Path) -> None:
    play(experiment(tmp_path))
    # retries and timeouts change how hard the client tries, not what a game is; more games extend the cell
    again = play(experiment(tmp_path, games_per_cell=4,
                            models={"scripted/naive": {"temperature": 0.0, "max_attempts": 9, "timeout_s": 5.0}}))
    assert again.games_already_landed == 6 and again.games_played == 2


def test_a_renamed_cell_is_new_games(tmp_path: Path) -> None:
    play(experiment(tmp_path))
    renamed = experiment(tmp_path, rules={"discussion_rounds": 3}, cells=[
        {"name": "policies-3-rounds", "agents": {"default": "policy/random"}}])
    s = play(renamed)
    assert s.games_played == 3 and s.games_already_landed == 0
    rounds = {cell: rules for cell, rules in landed(renamed)}
    assert '"discussion_rounds":3' in rounds["policies-3-rounds"].replace(" ", "")
    assert '"discussion_rounds":2' in rounds["policies"].replace(" ", "")


def test_a_fingerprint_recorded_before_any_game_landed_follows_the_file(tmp_path: Path) -> None:
    """A run stopped after planning (nothing landed) has played nothing the old way: the new file is taken."""
    exp = experiment(tmp_path)
    con = duckdb.connect(exp.warehouse)
    try:
        from mafiabench.study.design import cell_fingerprints, expand_cells
        from mafiabench.warehouse.raw import check_cell_fingerprints, ensure_schema

        ensure_schema(con)
        check_cell_fingerprints(con, cell_fingerprints(exp, expand_cells(exp)))
    finally:
        con.close()
    assert play(experiment(tmp_path, rules={"discussion_rounds": 1})).games_played == 6

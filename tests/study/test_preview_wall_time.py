"""Preview tells time: the wall time of a run from the sample games' critical paths, games in flight, each
provider's calls in flight and latency, with the binding limit named (hand-computed cases)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mafiabench.cli import main
from mafiabench.commands.preview import duration
from mafiabench.study.estimate import call_batches, estimate_plan
from mafiabench.study.spec import parse_experiment

GOLDEN = Path(__file__).parents[1] / "golden"


def test_calls_are_grouped_as_the_engine_asks_them() -> None:
    mini = json.loads((GOLDEN / "mini_mafia_agent_night_naive.json").read_text())["calls"]
    # kill, investigate, 6 messages one by one, 3 votes at once: 9 batches
    assert [len(b) for b in call_batches(mini)] == [1, 1, 1, 1, 1, 1, 1, 1, 3]
    day_only = json.loads((GOLDEN / "mini_mafia_naive.json").read_text())["calls"]
    assert [len(b) for b in call_batches(day_only)] == [1, 1, 1, 1, 1, 1, 3]


def experiment(tmp_path: Path, **concurrency: Any) -> Any:
    return parse_experiment({
        "name": "wall", "games_per_cell": 8, "warehouse": str(tmp_path / "w.duckdb"),
        "cells": [{"name": "c", "agents": {"default": "slow/m"}}],
        "endpoints": {"slow": {"kind": "fake", "options": {"latency_ms": 500}}},
        "concurrency": concurrency,
    })


def test_wall_time_by_hand(tmp_path: Path) -> None:
    # A Mini-Mafia game: 6 messages and 3 simultaneous votes, 9 calls in 7 batches, 0.5 s each: 3.5 s a game.
    est = estimate_plan(experiment(tmp_path, games=4, providers={"slow": 2}), samples=2)
    cell = est.cells[0]
    assert cell.calls_per_game == 9 and cell.critical_path_s == pytest.approx(3.5)
    wall = est.wall_time()
    # games: 8 × 3.5 s / 4 in flight = 7 s; the provider: 8 × 9 calls × 0.5 s / 2 in flight = 18 s: it binds
    assert wall.by_limit == pytest.approx({"4 games in flight": 7.0, "slow: 2 calls in flight": 18.0})
    assert wall.seconds == pytest.approx(18.0) and wall.limit == "slow: 2 calls in flight"
    # with more calls allowed than games can use, games in flight bind: 8 × 3.5 / 4 = 7 s versus 72 × 0.5 / 64
    wide = estimate_plan(experiment(tmp_path, games=4, providers={"slow": 64}), samples=1).wall_time()
    assert wide.seconds == pytest.approx(7.0) and wide.limit == "4 games in flight"


def test_the_experiments_latency_wins_over_the_endpoints(tmp_path: Path) -> None:
    est = estimate_plan(experiment(tmp_path, games=8, latency_s={"slow": 2.0}), samples=1)
    assert est.latency == {"slow": 2.0} and est.latency_source == {"slow": "concurrency.latency_s"}
    assert est.cells[0].critical_path_s == pytest.approx(14.0)  # 7 batches × 2 s
    assert est.wall_time().seconds == pytest.approx(14.0)  # 8 games × 14 s / 8 in flight


def test_preview_prints_the_wall_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "exp.toml"
    path.write_text('name = "wall"\ngames_per_cell = 8\n[[cells]]\nname = "c"\nagents = { default = "slow/m" }\n'
                    '[endpoints.slow]\nkind = "fake"\noptions = { latency_ms = 500 }\n'
                    '[concurrency]\ngames = 4\nproviders = { slow = 2 }\n', encoding="utf-8")
    assert main(["preview", str(path), "--warehouse", str(tmp_path / "w.duckdb")]) == 0
    out = capsys.readouterr().out
    assert "Wall time: about 18 s, bound by slow: 2 calls in flight" in out
    assert "slow 0.5 s (endpoint option latency_ms)" in out


@pytest.mark.parametrize(("seconds", "text"), [
    (0.2, "under a second of model calls (CPU time not counted)"), (18, "about 18 s"), (600, "about 10 min"),
    (3 * 3600 + 5 * 60, "about 3 h 05 min"), (3 * 86400 + 4 * 3600, "about 3 d 04 h")])
def test_durations_read_as_estimates(seconds: float, text: str) -> None:
    assert duration(seconds) == text

"""Adaptive sample sizes ([stopping]): exact intervals by hand, the rule's coverage by simulation, and a study of
scripted cells with known win rates that stops every cell at the asked width."""

from __future__ import annotations

import asyncio
import json
from fractions import Fraction
from pathlib import Path

import duckdb
import numpy as np
import pytest

from mafiabench.errors import UserError
from mafiabench.study.run import run_study
from mafiabench.study.spec import parse_experiment
from mafiabench.study.stopping import Rule, clopper_pearson, simulate_coverage
from support.stopping import stopping_experiment


def test_clopper_pearson_and_the_looks_by_hand() -> None:
    # k = 0 or n: the one-sided bound is (alpha/2)^(1/n); 0.025^(1/10) = 0.69150...
    assert clopper_pearson(0, 10, 0.95) == pytest.approx((0.0, 1 - 0.025 ** 0.1))
    assert clopper_pearson(10, 10, 0.95) == pytest.approx((0.025 ** 0.1, 1.0))
    # 5 of 10: the textbook interval [0.1871, 0.8129]
    lo, hi = clopper_pearson(5, 10, 0.95)
    assert (round(lo, 4), round(hi, 4)) == (0.1871, 0.8129)
    rule = Rule(half_width=0.1, min_games=20, max_games=100, wave=30)
    assert rule.looks == [20, 50, 80, 100]
    assert rule.level_per_look == pytest.approx(1 - 0.05 / 4)
    assert rule.next_look(21) == 50 and rule.next_look(50) == 50 and rule.next_look(101) == 100


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 2 / 3])
def test_the_rule_covers_the_truth_at_least_at_its_confidence(p: float) -> None:
    """Optional stopping with 20 looks: the Bonferroni-widened intervals cover the true rate at least 95% of the
    time wherever the rule stops (and stop for width almost always before max_games)."""
    rule = Rule(half_width=0.1, min_games=20, max_games=400, wave=20)
    coverage, games, by_width = simulate_coverage(rule, p, 3000, np.random.default_rng(7))
    assert coverage >= 0.95
    assert by_width > 0.99 and games < 400
    # every stopping interval of the rule is at most the asked width, by construction (checked on the study below)


def test_plain_intervals_at_every_look_cover_less_than_the_rule() -> None:
    """Why the level is widened: the same looks with plain 95% intervals cover less (a fair coin, many looks)."""
    rule = Rule(half_width=0.15, min_games=10, max_games=600, wave=5)
    rng = np.random.default_rng(11)
    honest, _, _ = simulate_coverage(rule, 0.5, 3000, rng)
    plain, _, _ = simulate_coverage(rule, 0.5, 3000, rng, bonferroni=False)
    assert honest >= 0.95 and plain < honest


def test_a_study_stops_every_cell_at_the_asked_width_and_resumes_without_a_new_look(tmp_path: Path) -> None:
    exp = stopping_experiment(tmp_path)
    s = asyncio.run(run_study(exp, progress=False))
    truth = {"random": Fraction(2, 3), "informed": Fraction(5, 12)}
    cells = s.stopping["cells"]
    assert set(cells) == set(truth)
    con = duckdb.connect(exp.warehouse, read_only=True)
    try:
        landed = dict(con.execute("select cell, count(*) from raw_games group by cell").fetchall())
        (summary_json,) = con.execute("select summary_json from raw_runs").fetchone()  # type: ignore[misc]
    finally:
        con.close()
    rule = exp.stopping.rule()
    for name, look in cells.items():
        assert look["state"] == "width" and look["half_width"] <= 0.08
        assert look["games"] in rule.looks and 60 <= look["games"] < 3000
        assert landed[name] == look["games"]  # exactly the games up to its stopping look, no more
        assert look["lower"] <= truth[name] <= look["upper"]
        assert look["n"] == look["games"]  # policy games are all scored
    assert s.games_played == sum(landed.values()) < 2 * 3000
    assert json.loads(summary_json)["stopping"]["rule"]["half_width"] == 0.08  # the rule is recorded with the run
    assert "stopping rule" in s.text() and "Bonferroni" in s.text()
    again = asyncio.run(run_study(exp, progress=False))
    assert again.games_played == 0 and again.stopping["cells"] == cells  # same looks, same games: nothing new


def test_a_cell_that_cannot_reach_the_width_stops_at_max_games(tmp_path: Path) -> None:
    exp = stopping_experiment(tmp_path, half_width=0.01, min_games=30, wave=30, max_games=90)
    s = asyncio.run(run_study(exp, progress=False))
    assert {c["state"] for c in s.stopping["cells"].values()} == {"max"}
    assert s.games_played == 2 * 90


def test_stopping_and_fixed_counts_are_not_mixed() -> None:
    with pytest.raises(UserError, match=r"cells\[0\]\.games = 5"):
        parse_experiment(
            {
                "name": "x",
                "cells": [{"name": "c", "agents": {"default": "policy/random"}, "games": 5}],
                "stopping": {"half_width": 0.1, "min_games": 10, "max_games": 100},
            },
            "exp.toml",
        )
    with pytest.raises(UserError, match="max_games"):
        parse_experiment(
            {
                "name": "x",
                "cells": [{"name": "c", "agents": {"default": "policy/random"}}],
                "stopping": {"half_width": 0.1, "min_games": 100, "max_games": 10},
            },
            "exp.toml",
        )


def test_preview_counts_each_cell_at_the_rules_bound(tmp_path: Path) -> None:
    from mafiabench.commands.preview import render
    from mafiabench.study.estimate import estimate_plan

    exp = stopping_experiment(tmp_path)
    bound = exp.stopping.rule().worst_case_games()
    # 1/2 is the widest interval: 480 games at ±0.08 with 50 looks (each at 1 - 0.05/50); a fixed n needs 160 at 95%
    assert bound == 480
    est = estimate_plan(exp, samples=1)
    assert [c.to_play for c in est.cells] == [bound, bound] and est.to_play == 2 * bound
    text = render(est)
    assert "Stopping:" in text and "60 to 3,000 games" in text and "needs 480" in text


def test_a_fixed_design_of_the_same_width_needs_fewer_games_than_the_looks_cost() -> None:
    from mafiabench.study.stopping import fixed_n_games

    assert fixed_n_games(0.08) == 160 < Rule(0.08, 60, 3000, 60).worst_case_games()


def test_the_example_experiment_is_valid_and_previews_its_bound() -> None:
    from mafiabench.study.spec import load_experiment

    exp = load_experiment(Path(__file__).resolve().parents[2] / "experiments" / "adaptive_offline.toml")
    assert exp.stopping is not None and exp.planned_games() == 3 * 2000
    assert exp.stopping.rule().looks[:2] == [200, 400] and len(exp.stopping.rule().looks) == 10

"""`preview` says what the leaderboard of a plan will rate: each rating's expected 95% interval width from the
design's Fisher information at zero strengths (hand-computed on a mirror pair), the games needed for a chosen width,
and a warning when the design leaves ratings unidentified."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from mafiabench.cli import main
from mafiabench.commands.preview import planned_line_ups, render_ratings
from mafiabench.study.spec import parse_experiment
from mafiabench.transform.models.ratings import Z95, design_widths


def _experiment(cells: list[dict], games: int = 10) -> object:
    return parse_experiment({"name": "w", "variant": "mini-mafia", "games_per_cell": games, "cells": cells})


def test_a_mirror_pair_width_by_hand() -> None:
    """A as mafioso against B in every town seat, and the other way round, 10 games each. In the overall fit the
    rows are (1, +-sqrt(2)) in (h, z) and r_A = z / sqrt(2); at zero strengths each game gives information 1/4, so
    z's precision is 1 + 20 * 2 / 4 = 11 (h's cross terms cancel), r_A's variance 1 / 22 and its width
    2 * 1.96 / sqrt(22); the data alone give r_A variance 1 / 20, so a width w needs 20 * (2 * 1.96)^2 / 20 / w^2."""
    exp = _experiment([{"name": "ab", "agents": {"mafioso": "fake/a", "default": "fake/b"}},
                       {"name": "ba", "agents": {"mafioso": "fake/b", "default": "fake/a"}}])
    data = planned_line_ups(exp)
    assert data is not None and data.games.tolist() == [10, 10] and list(data.roles) == [
        "mafioso", "detective", "villager"]
    rows, unidentified = design_widths(data, width=0.5)
    overall = {r["model"]: r for r in rows if r["fit"] == "overall"}
    assert overall["fake/a"]["width"] == pytest.approx(2 * Z95 / math.sqrt(22), rel=1e-9)
    assert overall["fake/a"]["games_for_width"] == math.ceil(20 * (2 * Z95) ** 2 / 20 / 0.5**2)
    assert unidentified["overall"] == []
    text = render_ratings(exp, width=0.5)
    assert f"{2 * Z95 / math.sqrt(22):.2f} (fake/a)" in text and "62 games for 0.5" in text
    # By side a mirror pair sets only a_A + b_A (A as mafia and as town together), not the two apart.
    assert "warning: the design leaves 1 direction(s) of the by side ratings unidentified" in text


def test_preview_warns_when_the_design_leaves_ratings_unidentified() -> None:
    """A against B and C against D, never crossed: the by-side ratings are set only as one difference."""
    exp = _experiment([{"name": "ab", "agents": {"mafioso": "fake/a", "default": "fake/b"}},
                       {"name": "cd", "agents": {"mafioso": "fake/c", "default": "fake/d"}}])
    text = render_ratings(exp)
    assert "warning: the design leaves 1 direction(s) of the by side ratings unidentified" in text
    assert "by side   mafia      not identified for any of its 2 models" in text


def test_preview_prints_the_ratings_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "exp.toml"
    path.write_text('name = "w"\nvariant = "mini-mafia"\ngames_per_cell = 10\n'
                    '[[cells]]\nname = "ab"\nagents = { mafioso = "fake/a", default = "fake/b" }\n'
                    '[[cells]]\nname = "cd"\nagents = { mafioso = "fake/c", default = "fake/d" }\n', encoding="utf-8")
    assert main(["preview", str(path), "--no-probe", "--samples", "1", "--rating-width", "0.8"]) == 0
    out = capsys.readouterr().out
    assert "games the design needs for a width of 0.8" in out
    assert "warning: the design leaves 1 direction(s) of the by side ratings unidentified" in out

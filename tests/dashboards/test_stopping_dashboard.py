"""The adaptive-sample-size rule on the dashboards: `mart_stopping` unpacks each experiment's latest [stopping] run,
and the win-rates page shows the rule and every cell's interval where it stopped."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime
from html import unescape
from pathlib import Path
from typing import Any

import duckdb
import pytest

from mafiabench import publish
from mafiabench.study.run import run_study
from mafiabench.study.spec import parse_experiment
from mafiabench.warehouse.landing import record_run
from support.stopping import stopping_experiment

pytestmark = pytest.mark.slow  # a study played, built and rendered, once for the module


def page_cells(out: Path) -> dict[str, list[str]]:
    """The stopping table of win-rates.html: cell name -> its cells' text."""
    html = (out / "win-rates.html").read_text(encoding="utf-8")
    table = re.search(r'<table class="stopping">(.*?)</table>', html, re.S)
    assert table, "no stopping table on the win-rates page"
    rows = re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S)
    cells = [[unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
             for r in rows]
    return {c[0]: c for c in cells if c}


def mart(warehouse: str) -> list[dict[str, Any]]:
    con = duckdb.connect(warehouse, read_only=True)
    try:
        cur = con.execute("select * from mart_stopping order by cell")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()


@pytest.fixture(scope="module")
def adaptive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Path]:
    tmp = tmp_path_factory.mktemp("stopping-dash")
    exp = stopping_experiment(tmp)
    summary = asyncio.run(run_study(exp, progress=False))
    publish.build(Path(exp.warehouse))
    out = tmp / "dash"
    publish.render(Path(exp.warehouse), out)
    return exp, summary, out


def test_the_page_shows_the_rule_and_each_cell_where_it_stopped(adaptive: tuple[Any, Any, Path]) -> None:
    _, summary, out = adaptive
    looks = summary.stopping["cells"]
    html = (out / "win-rates.html").read_text(encoding="utf-8")
    assert "Adaptive sample sizes" in html
    assert unescape(summary.stopping["description"]) in unescape(html)  # the rule, in the run summary's words
    shown = page_cells(out)
    assert set(shown) == set(looks) == {"random", "informed"}
    for name, look in looks.items():
        row = shown[name]
        assert row[1] == f"{look['games']:,}"
        assert row[2] == f"{look['k']:,} / {look['n']:,}"
        assert row[3] == f"{100 * look['k'] / look['n']:.1f}%"
        lo, hi = (float(x) for x in re.findall(r"[\d.]+", row[4]))
        assert (lo, hi) == pytest.approx((100 * look["lower"], 100 * look["upper"]), abs=0.051)
        assert float(row[5].rstrip("%")) <= 8.0  # the asked half-width, 0.08
        assert row[6] == "stopped: narrow enough"


def test_the_mart_matches_the_run_summary(adaptive: tuple[Any, Any, Path]) -> None:
    exp, summary, _ = adaptive
    rule = exp.stopping.rule()
    rows = mart(exp.warehouse)
    assert [r["cell"] for r in rows] == ["informed", "random"]
    for r in rows:
        look = summary.stopping["cells"][r["cell"]]
        assert (r["games"], r["n"], r["k"], r["state"]) == (look["games"], look["n"], look["k"], "width")
        assert r["mafia_win_rate"] == pytest.approx(look["k"] / look["n"])
        assert r["half_width"] == pytest.approx(look["half_width"]) and r["stopped"] is True
        assert (r["rule_half_width"], r["rule_min_games"], r["rule_max_games"], r["rule_wave"]) == (0.08, 60, 3000, 60)
        assert r["rule_looks"] == len(rule.looks)
        assert r["rule_level_per_look"] == pytest.approx(1 - 0.05 / len(rule.looks))


def test_the_latest_run_wins_and_an_open_cell_says_so(tmp_path: Path) -> None:
    exp = stopping_experiment(tmp_path, max_games=120)
    asyncio.run(run_study(exp, progress=False))
    later = {
        "run_id": "zz-later", "experiment": "adaptive", "status": "finished",
        "started_at": datetime(2099, 1, 1, tzinfo=UTC), "finished_at": datetime(2099, 1, 1, 0, 5, tzinfo=UTC),
        "summary_json": json.dumps({"stopping": {
            "description": "hand-written rule",
            "rule": {"half_width": 0.1, "min_games": 60, "max_games": 240, "wave": 60, "confidence": 0.95,
                     "looks": 4, "level_per_look": 0.9875},
            "cells": {"random": {"cell": "random", "games": 120, "n": 120, "k": 80, "lower": 0.5, "upper": 0.75,
                                 "state": "continue", "half_width": 0.125}},
        }}),
    }
    con = duckdb.connect(exp.warehouse)
    try:
        record_run(con, later)
    finally:
        con.close()
    publish.build(Path(exp.warehouse))
    rows = mart(exp.warehouse)
    assert len(rows) == 1  # only the latest run's looks, not the earlier run's two cells
    (r,) = rows
    assert (r["run_id"], r["cell"], r["games"], r["k"], r["n"]) == ("zz-later", "random", 120, 80, 120)
    assert r["mafia_win_rate"] == pytest.approx(2 / 3) and r["half_width"] == pytest.approx(0.125)
    assert r["stopped"] is False and r["rule_description"] == "hand-written rule"
    out = tmp_path / "dash"
    publish.render(Path(exp.warehouse), out)
    assert page_cells(out)["random"][6] == "open"


def test_a_study_without_a_rule_shows_no_stopping_section(tmp_path: Path) -> None:
    exp = parse_experiment(
        {"name": "fixed", "games_per_cell": 30, "cells": [{"name": "random", "agents": {"default": "policy/random"}}],
         "warehouse": str(tmp_path / "w.duckdb")},
        "<test>",
    )
    asyncio.run(run_study(exp, progress=False))
    publish.build(Path(exp.warehouse))
    assert mart(exp.warehouse) == []
    out = tmp_path / "dash"
    publish.render(Path(exp.warehouse), out)
    html = (out / "win-rates.html").read_text(encoding="utf-8")
    assert "Win rates" in html and "Adaptive sample sizes" not in html

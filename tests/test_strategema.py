"""Strategema's tables: hand-checked table pivots, and the offline study of experiments/strategema_offline.toml
producing every table and its dashboard page (the browser test opens that page too)."""

from __future__ import annotations

import asyncio
import math
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from mafiabench import publish
from mafiabench.dashboards.pages.strategema import table1, table2, table3
from mafiabench.study.run import run_study
from mafiabench.study.spec import load_experiment
from test_dashboards import _shared
from test_marts_common import rows

ROOT = Path(__file__).resolve().parents[1]


def conf(n: int, m: int, configuration: str, k: int, games: int) -> dict[str, Any]:
    p = k / games
    return {"n_players": n, "n_mafia": m, "configuration": configuration, "n": games, "k": k, "mafia_win_rate": p,
            "standard_error": math.sqrt(p * (1 - p) / games)}


def test_tables_pivot_the_configurations_as_the_paper_lays_them_out() -> None:
    rows_ = [conf(6, 2, "baseline", 3, 4), conf(8, 2, "baseline", 1, 4), conf(8, 2, "no_speaking", 3, 4),
             conf(8, 2, "argmax_voting", 2, 4), conf(8, 2, "limited_memory", 0, 4), conf(10, 3, "no_speaking", 1, 2)]
    assert [(r["n_players"], r["n_mafia"]) for r in table1(rows_)] == [(6, 2), (8, 2)]
    (t2,) = table2(rows_)  # only (8, 2) has both; (10, 3) has no baseline
    # with: 1/4 = 0.25, se = sqrt(0.25 * 0.75 / 4) = 0.2165; without: 3/4, same se
    assert t2["difference"] == pytest.approx(-0.5)
    assert t2["difference_se"] == pytest.approx(math.sqrt(2 * 0.25 * 0.75 / 4))
    setting, t3 = table3(rows_)
    assert setting == (8, 2)
    assert [r["configuration"] for r in t3] == ["baseline", "no_speaking", "argmax_voting", "limited_memory"]
    assert table3([]) == (None, [])


def offline_study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, float]:
    """(warehouse, dashboards, seconds): experiments/strategema_offline.toml with 2 games per cell (every cell, so
    every table), played, built behind the quality gate and rendered; shared by the xdist workers."""
    folder, lock = _shared(tmp_path_factory, "strategema-offline")
    try:
        db, out = folder / "w.duckdb", folder / "dashboards"
        if not (folder / "done").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            started = time.perf_counter()
            exp = load_experiment(ROOT / "experiments" / "strategema_offline.toml")
            exp = exp.model_copy(update={"games_per_cell": 2, "warehouse": str(db)})
            summary = asyncio.run(run_study(exp, warehouse=db, progress=False))
            assert summary.status == "completed", summary.text()
            assert publish.build(db).passed
            publish.render(db, out)
            (folder / "seconds").write_text(str(time.perf_counter() - started))
            (folder / "done").touch()
        return db, out, float((folder / "seconds").read_text())
    finally:
        lock.close()


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, float]:
    return offline_study(tmp_path_factory)


def test_the_offline_study_produces_every_table(study: tuple[Path, Path, float]) -> None:
    import duckdb

    db, out, seconds = study
    con = duckdb.connect(str(db), read_only=True)
    configs = rows(con, "select n_players, n_mafia, configuration, n from mart_classic_configurations")
    assert {(r["n_players"], r["n_mafia"], r["configuration"]) for r in configs} == {
        (6, 2, "baseline"), (8, 2, "baseline"), (10, 3, "baseline"), (12, 3, "baseline"),
        (8, 2, "no_speaking"), (8, 2, "argmax_voting"), (8, 2, "limited_memory")}
    assert all(r["n"] == 2 for r in configs)
    (test,) = rows(con, "select * from mart_consistency_tests where variant = 'classic'")
    assert test["n_winners"] > 1 and test["n_losers"] > 1 and not math.isnan(test["df"])
    assert rows(con, "select count(*) as n from mart_deception_scores")[0]["n"] > 0
    assert rows(con, "select sum(n_belief_answers) as n from mart_belief_fallbacks")[0]["n"] > 0
    assert len(rows(con, "select * from mart_coherence_summary")) == 1
    page = (out / "strategema.html").read_text(encoding="utf-8")
    for heading in ("Table 1", "Table 2", "Table 3: ablations on N=8, M=2", "winners against losers",
                    "Semantic coherence", "cut by their token cap"):
        assert heading in page
    print(f"offline Strategema study (14 games) played, built, gated and rendered in {seconds:.1f} s")

"""The offline Strategema study (experiments/strategema_offline.toml), played, built and rendered once per test
session, for its tables' tests and the browser's."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from mafiabench import publish
from mafiabench.study.run import run_study
from mafiabench.study.spec import load_experiment
from support.dashboards import _shared

ROOT = Path(__file__).resolve().parents[2]


UNIFORM = "strategema-uniform"


def offline_study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, float]:
    """(warehouse, dashboards, seconds): experiments/strategema_offline.toml with 2 games per cell (every cell, so
    every table), and in the same warehouse a second study, `strategema-uniform`, whose villagers answer uniform
    beliefs (`fake/uniform`: P(mafia) = M / (N - 1) for everyone, never updated; prompts classic/v4-belief, the
    P(mafia) extension) on the four configurations; played,
    built behind the quality gate and rendered; shared by the xdist workers."""
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
            baseline = [c.model_copy(update={"agents": {"default": "fake/uniform"}})
                        for c in exp.cells if not c.rules.keys() - {"n_players", "n_mafia"} and c.games is None]
            uniform = exp.model_copy(update={"name": UNIFORM, "cells": baseline, "games_per_cell": 1,
                                             "prompt_version": "v4-belief"})  # the P(mafia) extension
            summary = asyncio.run(run_study(uniform, warehouse=db, progress=False))
            assert summary.status == "completed", summary.text()
            assert publish.build(db).passed
            publish.render(db, out)
            (folder / "seconds").write_text(str(time.perf_counter() - started))
            (folder / "done").touch()
        return db, out, float((folder / "seconds").read_text())
    finally:
        lock.close()

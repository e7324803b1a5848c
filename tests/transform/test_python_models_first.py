"""`stage_python` runs first the Python models whose tables the gate reads (`first`, in its order), says when each
model's tables are staged (`written`: the gate then starts the suites over them), and lists the models in the
registry's order."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl

from mafiabench.transform.build.marts import Staged, stage_python
from support.python_steps import FakeStep

ran: list[str] = []  # the models' names as they run


def _step(name: str, outputs: tuple[str, ...]) -> FakeStep:
    def frames(con: duckdb.DuckDBPyConnection, step: FakeStep) -> dict[str, pl.DataFrame]:
        ran.append(step.name)
        return {t: pl.DataFrame({"n": [len(ran)]}) for t in step.outputs}

    return FakeStep(name, outputs, frames)


def test_the_models_the_gate_reads_run_first_and_are_heard_of_as_staged(tmp_path: Path) -> None:
    ran.clear()
    con = duckdb.connect()
    staged = Staged(project=tmp_path)
    staged.python_steps = [_step("m_a", ("a",)), _step("m_b", ("b1", "b2")), _step("m_c", ("c",)), _step("m_d", ("d",))]
    heard: list[tuple[str, ...]] = []

    def written(tables: tuple[str, ...]) -> None:
        heard.append(tables)
        assert all(t in staged.relations for t in tables)  # readable when heard of

    stage_python(con, staged, written, first=["c", "b2"])
    assert ran == ["m_c", "m_b", "m_a", "m_d"]  # those the gate reads first, in its order; the others as registered
    assert heard == [("c",), ("b1", "b2"), ("a",), ("d",)]
    assert [m.name for m in staged.models] == ["m_a", "m_b", "m_c", "m_d"]
    assert con.execute("select n from __staged_c").fetchall() == [(1,)] and staged.python_steps == []

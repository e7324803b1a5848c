"""`stage_python` runs first the Python models whose tables the gate reads (`first`, in its order), says when each
model's tables are staged (`written`: the gate then starts the suites over them), and lists the models in the
registry's order."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from mafiabench.transform.build.marts import Staged, stage_python

ran: list[str] = []  # the models' names as they run

@dataclass(frozen=True)
class _Step:
    """A Python model as `stage_python` uses one (name, layer, outputs, run)."""

    name: str
    outputs: tuple[str, ...]
    layer: str = "marts"

    def run(self, con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
        ran.append(self.name)
        return {t: pl.DataFrame({"n": [len(ran)]}) for t in self.outputs}


def test_the_models_the_gate_reads_run_first_and_are_heard_of_as_staged(tmp_path: Path) -> None:
    ran.clear()
    con = duckdb.connect()
    staged = Staged(project=tmp_path)
    staged.python_steps = [_Step("m_a", ("a",)), _Step("m_b", ("b1", "b2")), _Step("m_c", ("c",)), _Step("m_d", ("d",))]
    heard: list[tuple[str, ...]] = []

    def written(tables: tuple[str, ...]) -> None:
        heard.append(tables)
        assert all(t in staged.relations for t in tables)  # readable when heard of

    stage_python(con, staged, written, first=["c", "b2"])
    assert ran == ["m_c", "m_b", "m_a", "m_d"]  # those the gate reads first, in its order; the others as registered
    assert heard == [("c",), ("b1", "b2"), ("a",), ("d",)]
    assert [m.name for m in staged.models] == ["m_a", "m_b", "m_c", "m_d"]
    assert con.execute("select n from __staged_c").fetchall() == [(1,)] and staged.python_steps == []

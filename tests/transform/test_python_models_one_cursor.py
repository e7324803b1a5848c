"""`stage_python` gives every Python model the same cursor on the staged build: its views of the staged relations
(about 60) are made once, not once per model (0.03-0.09 s each time at a million games, on the gate's path)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import polars as pl

from mafiabench.transform.build.marts import Staged, stage_python


@dataclass(frozen=True)
class _Step:
    """A Python model as `stage_python` uses one; keeps the cursor it was given (alive, so none is a reused id)."""

    name: str
    outputs: tuple[str, ...]
    seen: list[duckdb.DuckDBPyConnection] = field(default_factory=list)
    layer: str = "marts"

    def run(self, con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
        self.seen.append(con)
        n = con.execute("select count(*) from fct_games").fetchall()[0][0]  # a staged relation, by its own name
        return {t: pl.DataFrame({"n": [n]}) for t in self.outputs}


def test_every_model_reads_the_staged_build_through_one_cursor(tmp_path: Path) -> None:
    con = duckdb.connect()
    con.execute("create table __staged_fct_games as select range as game_id from range(3)")
    staged = Staged(project=tmp_path)
    staged.relations["fct_games"] = ("__staged_fct_games", "table")
    seen: list[duckdb.DuckDBPyConnection] = []
    staged.python_steps = [_Step("m_a", ("a",), seen), _Step("m_b", ("b",), seen), _Step("m_c", ("c",), seen)]
    stage_python(con, staged)
    assert len(seen) == 3 and seen[1] is seen[0] and seen[2] is seen[0]
    assert [con.execute(f"select n from __staged_{t}").fetchall() for t in "abc"] == [[(3,)]] * 3
    assert con.execute("select count(*) from duckdb_views() where view_name = 'fct_games'").fetchall() == [(0,)]

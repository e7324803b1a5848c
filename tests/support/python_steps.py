"""A stand-in for a Python model as `transform.build.marts.stage_python` uses one (name, layer, outputs, run), whose
tables a test gives: a registry entry without its model's work."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import polars as pl


@dataclass(frozen=True)
class FakeStep:
    """`frames(con, step)`: the tables `run` returns, one per output."""

    name: str
    outputs: tuple[str, ...]
    frames: Callable[[duckdb.DuckDBPyConnection, FakeStep], dict[str, pl.DataFrame]]
    layer: str = "marts"

    def run(self, con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
        return self.frames(con, self)

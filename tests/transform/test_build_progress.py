"""A build tells its progress listener of every model it builds, once each, and how many there are to build (the
bar of `mafiabench build` and of `run --publish` reads it: both were silent for half a minute or more)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from mafiabench.publish import build, showing_progress
from mafiabench.warehouse.raw import connect, load_records
from support.records import cell_records


class Heard:
    """What a progress listener hears (dbt reports from its worker threads; list.append is atomic)."""

    def __init__(self) -> None:
        self.parts: dict[str, int] = {}
        self.names: list[str] = []

    def expect(self, part: str, models: int) -> None:
        self.parts[part] = models

    def done(self, name: str) -> None:
        self.names.append(name)


def test_every_model_is_heard_once_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    con = connect(path)
    load_records(con, cell_records("g", n=4, mafia_wins=2, models="X"))
    con.close()
    heard = Heard()
    # as `run --publish` shows it: the build is inside the study flow, handed no bar of its own
    with showing_progress(lambda: contextlib.nullcontext(heard)):
        result = build(path)
    assert result.published
    names = [m.name for m in result.models]
    assert len(names) > 40 and sorted(heard.names) == sorted(names)  # every model, once
    assert set(heard.parts) == {"sql", "python"} and sum(heard.parts.values()) == len(names)
    assert heard.parts["python"] == sum(1 for m in result.models if m.kind == "python")

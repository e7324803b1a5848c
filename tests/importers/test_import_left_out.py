"""An import names every game it left out, and why, wherever it reports (issue 40 item 5): the Hidden in Plain Text
offline study said "2 unreadable" and nothing more. The command's default output is short (counts, the games left
out, the studies), its tables (invalid games by reason, flagged events, notes) with -v; names from the dataset are
escaped; the bar hears of every game. Data: the Dallinger fixtures (tests/fixtures/datasets/dallinger/README.md:
`e5f6...-data` has an unknown node type, `f607...-data` no info.csv)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mafiabench.cli import main
from mafiabench.flows.pipeline import import_text
from mafiabench.importers import run_import
from mafiabench.warehouse.raw import connect

UNREADABLE = (
    "  unreadable: e5f60718293a4b5c6d7e8f90a1b2c3d4-data/node.csv row id=2: field type must be source, mafioso or "
    "bystander, got 'wizard'",
    "  unreadable: f60718293a4b5c6d7e8f90a1b2c3d4e5-data: info.csv missing",
)


def test_the_command_names_the_games_left_out_and_keeps_its_tables_for_v(
        datasets: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wh = str(tmp_path / "w.duckdb")
    assert main(["import", "dallinger", str(datasets / "dallinger"), "--warehouse", wh]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(": 6 landed, 0 already present, 1 valid, 5 invalid (landed with a validity flag), "
                           "2 unreadable (not landed)")
    assert out[1:3] == list(UNREADABLE)
    assert "flagged events (landed, counted by no tally): 12" not in out and len(out) <= 6
    assert out[-1] == "  (-v shows invalid games by reason: 4, flagged events: 12, notes: 3)"
    assert main(["import", "dallinger", str(datasets / "dallinger"), "--warehouse", wh, "-v"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "  flagged events (landed, counted by no tally): 12" in out and "    no votes cast: 1" in out
    assert "    f60718293a4b5c6d7e8f90a1b2c3d4e5-data: info.csv missing" in out


def test_a_study_that_imports_names_them_too(datasets: Path, tmp_path: Path) -> None:
    """The line `run` and `detect` print for an experiment's [[imports]]."""
    con = connect(tmp_path / "w.duckdb")
    try:
        text = import_text("dallinger", run_import("dallinger", datasets / "dallinger", con).to_dict())
    finally:
        con.close()
    assert text.splitlines() == ["import dallinger: 8 games read, 6 landed, 0 already present, 2 unreadable",
                                 *UNREADABLE]


def test_names_from_the_dataset_are_escaped(datasets: Path, tmp_path: Path) -> None:
    """A folder name with a terminal escape in it is shown as its escape, not sent to the terminal."""
    evil = "f6\x1b[31m-data"
    shutil.copytree(datasets / "dallinger" / "f60718293a4b5c6d7e8f90a1b2c3d4e5-data", tmp_path / "in" / evil)
    con = connect(tmp_path / "w.duckdb")
    try:
        report = run_import("dallinger", tmp_path / "in", con)
    finally:
        con.close()
    assert report.unreadable == [(evil, f"{evil}: info.csv missing")]  # the report keeps the name as it is
    for text in (report.brief(), report.to_text(), import_text("dallinger", report.to_dict())):
        assert "\x1b" not in text and "f6\\x1b[31m-data: info.csv missing" in text


class Heard:
    def __init__(self) -> None:
        self.parts: dict[str, int] = {}
        self.names: list[str] = []

    def expect(self, part: str, count: int) -> None:
        self.parts[part] = count

    def done(self, name: str) -> None:
        self.names.append(name)


@pytest.mark.parametrize("fmt, folder", [("dallinger", "dallinger"), ("llmafia", "llmafia"),
                                         ("mini-mafia", "mini_mafia")])
def test_the_bar_hears_of_every_game(fmt: str, folder: str, datasets: Path, tmp_path: Path) -> None:
    con = connect(tmp_path / "w.duckdb")
    heard = Heard()
    try:
        report = run_import(fmt, datasets / folder, con, progress=heard)
    finally:
        con.close()
    assert heard.parts == {"games": report.games_read} and len(heard.names) == report.games_read
    assert {f for f, _ in report.unreadable} <= set(heard.names)


def test_the_warehouse_keeps_what_the_last_import_left_out(datasets: Path, tmp_path: Path) -> None:
    """raw_import_unreadable holds the files the last import of a source and path left out (a second import replaces
    them, never doubles them); mart_import_unreadable lists them less any another import has landed since."""
    from mafiabench.publish import build

    path = tmp_path / "w.duckdb"
    con = connect(path)
    try:
        for _ in range(2):
            run_import("dallinger", datasets / "dallinger", con)
        rows = con.execute("select source, path, file from raw_import_unreadable order by file").fetchall()
        assert rows == [("ibraheem2022-human", str(datasets / "dallinger"), f"{d}-data")
                        for d in ("e5f60718293a4b5c6d7e8f90a1b2c3d4", "f60718293a4b5c6d7e8f90a1b2c3d4e5")]
        # as if another import had since landed the folder that had no info.csv
        con.execute("update raw_games set source_file = 'f60718293a4b5c6d7e8f90a1b2c3d4e5-data' "
                    "where game_id = 'ibraheem2022-human-a1b2c3d4e5f60718293a4b5c6d7e8f90'")
    finally:
        con.close()
    assert build(path).published
    con = connect(path, read_only=True)
    try:
        assert con.execute("select file, reason from mart_import_unreadable").fetchall() == [
            ("e5f60718293a4b5c6d7e8f90a1b2c3d4-data", UNREADABLE[0].removeprefix("  unreadable: "))]
    finally:
        con.close()

"""`mafiabench query`, `mafiabench build` and `mafiabench catalogue` from the command line."""

from __future__ import annotations

import contextlib
import csv
import io
from pathlib import Path

import polars as pl
import pytest

from mafiabench.cli import main
from mafiabench.warehouse.raw import connect, load_records
from support.records import cell_records


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """(warehouse, stdout, stderr): five games landed and built by `mafiabench build`, its output kept for
    test_build_prints_a_summary (one build fewer than building again there)."""
    path = tmp_path_factory.mktemp("wh") / "w.duckdb"
    con = connect(path)
    load_records(con, cell_records("g", n=5, mafia_wins=2, models="X"))
    con.close()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["build", "--warehouse", str(path)]) == 0
    return path, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def warehouse(built: tuple[Path, str, str]) -> Path:
    return built[0]


def test_build_prints_a_summary(built: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """One line by default (models, time, the slowest three, the gate's verdict); the per-model table with -v. Not a
    terminal, so no bar either: the output is the line alone."""
    warehouse, first_out, first_err = built
    assert first_out.count("\n") == 1 and "-> PUBLISHED" in first_out and "slowest: " in first_out
    assert first_err == ""
    assert main(["build", "--warehouse", str(warehouse), "--no-validate"]) == 0
    out = capsys.readouterr()
    assert out.out.count("\n") == 1 and "NOT PUBLISHED" in out.out and "slowest: " in out.out
    assert out.err == ""
    assert main(["build", "--warehouse", str(warehouse), "-v"]) == 0
    out = capsys.readouterr()
    assert "PUBLISHED" in out.out and "mart_win_rates" in out.err and out.err.count("\n") > 40


def test_query_prints_a_table(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sql = "select dimension, n, k from mart_win_rates where dimension = 'all'"
    assert main(["query", sql, "--warehouse", str(warehouse)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["dimension", "n", "k"]
    assert lines[2].split() == ["all", "5", "2"]
    assert lines[-1] == "(1 row)"


def test_query_truncates_to_max_rows(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "select game_id from fct_games order by 1", "--warehouse", str(warehouse),
                 "--max-rows", "2"]) == 0
    out = capsys.readouterr().out
    assert "g-0" in out and "g-4" not in out and "more not shown" in out


def test_query_to_csv_and_parquet(warehouse: Path, tmp_path: Path) -> None:
    sql = "select game_id, winner from fct_games order by game_id"
    assert main(["query", sql, "--warehouse", str(warehouse), "--csv", str(tmp_path / "a.csv")]) == 0
    with open(tmp_path / "a.csv") as f:
        got = list(csv.DictReader(f))
    assert [r["game_id"] for r in got] == [f"g-{i}" for i in range(5)]
    assert main(["query", sql, "--warehouse", str(warehouse), "--parquet", str(tmp_path / "a.parquet")]) == 0
    assert pl.read_parquet(tmp_path / "a.parquet")["winner"].to_list() == ["mafia", "mafia", "town", "town", "town"]


def test_query_is_read_only(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "delete from raw_games", "--warehouse", str(warehouse)]) == 2
    assert "read-only" in capsys.readouterr().err.lower()
    assert main(["query", "select count(*) as n from raw_games", "--warehouse", str(warehouse)]) == 0
    assert capsys.readouterr().out.splitlines()[2].strip() == "5"


def test_query_errors_are_one_clear_line(warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "select nope from fct_games", "--warehouse", str(warehouse)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: query failed") and "nope" in err
    assert main(["query", "select 1", "--warehouse", str(tmp_path / "missing.duckdb")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_build_reports_a_failed_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.duckdb"
    con = connect(path)
    load_records(con, cell_records("g", n=3, mafia_wins=1, models="X"))
    con.execute("update raw_games set winner = null where game_id = 'g-1'")
    con.close()
    assert main(["build", "--warehouse", str(path)]) == 2
    err = capsys.readouterr().err
    assert "quality gate failed" in err and "one winner per finished game" in err and "g-1" in err


def test_catalogue_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cat.md"
    assert main(["catalogue", "--output", str(out)]) == 0
    assert out.read_text().startswith("# Warehouse catalogue")
    assert main(["catalogue", "--output", str(out), "--check"]) == 0
    out.write_text("stale")
    assert main(["catalogue", "--output", str(out), "--check"]) == 1

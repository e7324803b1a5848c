"""Every empty result explains itself (issue 31 item 5; `detect` already did, tests/detect/test_detect_why_empty.py): a
`run` with nothing to play, a `preview` of a fully landed experiment, a `query` writing a file with no rows, and a
`build` of a missing or gameless warehouse each say why in one line naming the file; `build` refuses those two with
exit code 2 and creates nothing (a mistyped path once got a new warehouse and lock file; a gameless one built for
half a minute before the gate refused it)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from mafiabench.cli import main

EXPERIMENT = """
name = "landed"
games_per_cell = 4
warehouse = "{warehouse}"

[[cells]]
name = "p"
agents = {{ mafioso = "policy/random", default = "policy/informed" }}
"""


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An experiment whose 4 games are all landed in its warehouse: (experiment file, warehouse)."""
    folder = tmp_path_factory.mktemp("landed")
    warehouse = folder / "w.duckdb"
    exp = folder / "landed.toml"
    exp.write_text(EXPERIMENT.format(warehouse=warehouse))
    assert main(["run", str(exp), "--no-prefect", "--no-progress"]) == 0
    return exp, warehouse


def test_a_run_with_nothing_to_play_says_why(landed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    exp, warehouse = landed
    capsys.readouterr()
    assert main(["run", str(exp), "--no-prefect", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert (f"Nothing to play: all 4 planned games are already landed in {warehouse}; raise games_per_cell or add "
            "cells to play more") in out.splitlines()


def test_a_run_that_plays_says_nothing_of_the_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exp = tmp_path / "e.toml"
    exp.write_text(EXPERIMENT.format(warehouse=tmp_path / "w.duckdb"))
    assert main(["run", str(exp), "--no-prefect", "--no-progress"]) == 0
    assert "Nothing to play" not in capsys.readouterr().out


def test_a_preview_of_a_landed_experiment_says_why(
    landed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    exp, warehouse = landed
    capsys.readouterr()
    assert main(["preview", str(exp), "--samples", "1"]) == 0
    out = capsys.readouterr().out
    assert (f"Nothing to play: all 4 games are already landed in {warehouse}, so `mafiabench run` would play none "
            "(raise games_per_cell or add cells to play more)") in out.splitlines()
    assert main(["preview", str(exp), "--samples", "1", "--warehouse", str(warehouse.with_name("other.duckdb"))]) == 0
    assert "Nothing to play" not in capsys.readouterr().out


@pytest.mark.parametrize(("option", "holds"), [("--csv", "the header"), ("--parquet", "the column types")])
def test_a_query_writing_no_rows_says_so(
    landed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, holds: str
) -> None:
    _, warehouse = landed
    out = tmp_path / f"out{option.replace('--', '.')}"
    capsys.readouterr()
    sql = "select game_id from raw_games where game_id = 'no such game'"
    assert main(["query", sql, "--warehouse", str(warehouse), option, str(out)]) == 0
    err = capsys.readouterr().err.strip()
    assert err == (f"wrote {out} with no rows: the query returned none from {warehouse} (the file holds only {holds}; "
                   "check the query's filters and the table it reads)")
    assert out.is_file()
    assert main(["query", "select game_id from raw_games", "--warehouse", str(warehouse), option, str(out)]) == 0
    err = capsys.readouterr().err.strip()
    assert err == f"wrote {out}" + (" (4 rows)" if option == "--parquet" else "")


def test_building_a_missing_warehouse_is_refused_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "typo" / "mafiabnech.duckdb"
    assert main(["build", "--warehouse", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"nothing to build: warehouse {path} does not exist (land games with `mafiabench run`" in err
    assert len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # no folder, no warehouse, no lock file


def test_building_a_warehouse_without_games_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, setup in (("empty.duckdb", None), ("schema.duckdb", "create table raw_games (game_id varchar)")):
        path = tmp_path / name
        con = duckdb.connect(str(path))
        if setup:
            con.execute(setup)
        con.close()
        before = sorted(p.name for p in tmp_path.iterdir())
        assert main(["build", "--warehouse", str(path)]) == 2
        err = capsys.readouterr().err
        assert f"nothing to build: warehouse {path} holds no games (land games with `mafiabench run`" in err
        assert len(err.strip().splitlines()) == 1
        assert sorted(p.name for p in tmp_path.iterdir()) == before  # no lock file either
        con = duckdb.connect(str(path), read_only=True)
        assert not con.execute("select * from duckdb_tables() where table_name = 'build_runs'").fetchall()
        con.close()

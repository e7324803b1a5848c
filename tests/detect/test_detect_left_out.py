"""The detector names the games it left out (issue 40 item 5): the Hidden in Plain Text offline study said "9 games
read" without saying which imported games were not read or why. Now each game of the sources asked that was not read
is listed with the reason, in the report and its text. Games: the Dallinger fixtures (tests/fixtures/datasets/
dallinger/README.md says what each folder is), imported into a fresh warehouse."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mafiabench.detect.detection_runs import DetectorSpec, run_detection
from mafiabench.warehouse.raw import connect

HUMAN = "ibraheem2022-human"
# The fixture README's verdicts for the folders that land but are not read (valid games only).
LEFT_OUT = {
    f"{HUMAN}-0a1b2c3d4e5f60718293a4b5c6d7e8f9": "invalid: outside the study's protocol",
    f"{HUMAN}-a1b2c3d4e5f60718293a4b5c6d7e8f90": "invalid: outside the study's protocol",
    f"{HUMAN}-b2c3d4e5f60718293a4b5c6d7e8f90a1": "invalid: technical failure",
    f"{HUMAN}-c3d4e5f60718293a4b5c6d7e8f90a1b2": "did not finish (status unfinished: no winner recorded)",
    f"{HUMAN}-d4e5f60718293a4b5c6d7e8f90a1b2c3": "invalid: no votes cast",
}


def _warehouse(tmp_path: Path, import_fixtures: Callable[..., None]) -> Path:
    path = tmp_path / "w.duckdb"
    con = connect(path)
    try:
        import_fixtures(con, "dallinger")
    finally:
        con.close()
    return path


def test_each_game_not_read_is_named_with_its_reason(tmp_path: Path, import_fixtures: Callable[..., None]) -> None:
    report = run_detection(_warehouse(tmp_path, import_fixtures),
                           DetectorSpec(models=("policy/most-voted",), sources=(HUMAN,)))
    assert report.games == 1  # the one valid game (4c5d...)
    assert report.left_out == [f"{gid} ({HUMAN}): {why}" for gid, why in sorted(LEFT_OUT.items())]
    text = report.to_text()
    assert "left out: 5 game(s) of the sources asked, not read:" in text
    assert all(f"    {gid} ({HUMAN}): {why}" in text.splitlines() for gid, why in LEFT_OUT.items())


def test_invalid_games_read_are_not_left_out(tmp_path: Path, import_fixtures: Callable[..., None]) -> None:
    """With valid_only off, the invalid games are read: only the unfinished one is left out."""
    report = run_detection(_warehouse(tmp_path, import_fixtures),
                           DetectorSpec(models=("policy/most-voted",), sources=(HUMAN,), valid_only=False))
    gid = f"{HUMAN}-c3d4e5f60718293a4b5c6d7e8f90a1b2"
    assert report.left_out == [f"{gid} ({HUMAN}): {LEFT_OUT[gid]}"]

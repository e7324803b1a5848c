"""An empty detection explains itself (issue 31 item 5): after the demo, `detect` said "0 games read; 0 detections
planned" with no reason, because it reads only async and classic games and skipped the 540 Mini-Mafia games silently.
Now the report names the filter that left no game and the count it started from. Games are the repository's
fixtures (tests/fixtures/datasets: Mini-Mafia batches, Dallinger human games) imported into a fresh warehouse."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mafiabench.detect.detection_runs import DetectorSpec, run_detection
from mafiabench.warehouse.raw import connect


@pytest.fixture
def warehouse(tmp_path: Path, import_fixtures: Callable[..., None]) -> Callable[..., Path]:
    """`warehouse(fmt, ...)`: a fresh warehouse file holding the fixture datasets of those import formats."""

    def make(*formats: str) -> Path:
        path = tmp_path / "w.duckdb"
        con = connect(path)
        try:
            import_fixtures(con, *formats)
        finally:
            con.close()
        return path

    return make


def test_an_empty_warehouse_says_so(warehouse: Callable[..., Path]) -> None:
    report = run_detection(warehouse(), DetectorSpec(models=("policy/random",)))
    assert report.games == 0
    assert "the warehouse holds no games: play a study or import games first" in report.to_text()


def test_games_of_a_variant_the_detector_does_not_read_are_counted(warehouse: Callable[..., Path]) -> None:
    report = run_detection(warehouse("mini-mafia"), DetectorSpec(models=("policy/random",)))
    assert report.games == 0 and report.planned == 0
    assert report.why_empty == ("0 of 7 games are of a variant the detector reads: async, classic (the warehouse "
                                "holds 7 mini-mafia; [detector] variants chooses)")
    assert report.why_empty in report.to_text()


@pytest.mark.parametrize(("spec", "said"), [
    (DetectorSpec(models=("policy/random",), sources=("llmafia",)), "of those come from llmafia"),
    (DetectorSpec(models=("policy/random",), experiments=("other",), imported_games=()),
     "of those are simulated or pinned by imported_games"),
])
def test_the_first_filter_that_leaves_nothing_is_named(
    warehouse: Callable[..., Path], spec: DetectorSpec, said: str
) -> None:
    path = warehouse("mini-mafia", "dallinger")
    report = run_detection(path, spec)
    assert report.games == 0 and report.why_empty.startswith("0 of ") and report.why_empty.endswith(said)
    # the count is of the games that passed the earlier filters: the async human games, not all games
    assert not report.why_empty.startswith("0 of 7 ")


def test_a_detection_with_games_explains_nothing(warehouse: Callable[..., Path]) -> None:
    report = run_detection(warehouse("dallinger"), DetectorSpec(models=("policy/random",)))
    assert report.games > 0 and report.why_empty == ""

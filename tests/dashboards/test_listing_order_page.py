"""The listing-order leak check on the data-quality page (issue 35 item 1, `mart_listing_leaks`): the human dataset
in its real shape (fixture H, `tests/fixtures/datasets/dallinger/4c5d6e7f-…-data`, whose two mafia nodes are created
first, as in omonida/mafia-dataset), imported as a user imports it under 12 folder names, shows the cue on its raw
seat order and none on the detector's shuffled transcripts, there and on the detector page; a study's name is escaped
like any text."""

from __future__ import annotations

import shutil
from pathlib import Path

from mafiabench.cli import main
from mafiabench.detect.detection_runs import DetectorSpec, run_detection
from mafiabench.importers import run_import
from mafiabench.publish import build_warehouse
from mafiabench.warehouse.raw import connect, load_records
from support.records import mini_record, rotated_seats

H = Path(__file__).parents[1] / "fixtures" / "datasets" / "dallinger" / "4c5d6e7f-8091-a2b3-c4d5-e6f708192a3b-data"
COPIES = 12
EVIL = "<script>alert('study')</script>"


def test_the_raw_order_cue_is_shown_on_the_data_page(tmp_path: Path) -> None:
    for i in range(COPIES):
        shutil.copytree(H, tmp_path / "games" / f"{i:08x}-0000-0000-0000-000000000000-data")
    db, out = tmp_path / "w.duckdb", tmp_path / "dashboards"
    con = connect(db)
    assert run_import("dallinger", tmp_path / "games", con).valid == COPIES
    # a few simulated games of a study named as a user might name it (too few to test: said so, escaped)
    load_records(con, [mini_record(f"sim-{i}", seats=rotated_seats(i),
                                   design={"experiment": EVIL, "cell": "c", "game_index": i}) for i in range(3)])
    con.close()
    run_detection(db, DetectorSpec(models=("policy/random",), sources=("ibraheem2022-human",)))
    con = connect(db)
    assert build_warehouse(con).published  # an import's cue is reported, not refused
    con.close()
    assert main(["dashboards", "--warehouse", str(db), "--out", str(out)]) == 0
    page = (out / "data-quality.html").read_text(encoding="utf-8")
    section = page.split('id="listing-order"', 1)[1]
    # 9 players, 2 mafia: the first-listed is mafia in 12 of 12 (expected 12 * 2/9 = 2.7), the second too
    assert ("<strong>ibraheem2022-human</strong> (imported), seats:\nthe order tells the role: the player listed at "
            "position 1 is mafia in 12 of 12 (expected 2.7; Holm-adjusted p = ") in section
    assert "the player listed at position 2 is mafia in 12 of 12" in section
    assert ("<strong>ibraheem2022-human</strong> (imported), detector transcripts:\nno leak at the 9 positions "
            "tested.") in section
    assert "too few games to test any position (4 listed)." in section
    assert "simulation:&lt;script&gt;alert(&#39;study&#39;)&lt;/script&gt;" in section
    assert "<script>alert" not in page
    # the detector page, where the human games are compared, says the same of the source it read
    detector = (out / "detector.html").read_text(encoding="utf-8")
    assert ("The raw order of <strong>ibraheem2022-human</strong> tells the role: the player listed at position 1 is "
            "mafia in 12 of 12; the player listed at position 2 is mafia in 12 of 12.") in detector
    assert "in a seeded shuffle, in which the check finds no leak" in detector

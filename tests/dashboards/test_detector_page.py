"""The Mafia Detector page and its cleansed-transcript pages, rendered from a real build (no browser): the comparison
table's rows, links to exactly the text the detector read, and model text escaped there too."""

from __future__ import annotations

import asyncio
import dataclasses
import html
import re
from pathlib import Path

import pytest

from mafiabench.cli import main
from mafiabench.dashboards.pages.detector import cleansed_path
from mafiabench.detect.detection_runs import DetectorSpec, run_detection
from mafiabench.importers.common import run_import
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.protocols import rows_for_warehouse
from mafiabench.publish import build_warehouse
from mafiabench.study.protocol import protocol_card
from mafiabench.study.spec import load_experiment
from mafiabench.warehouse.raw import connect, load_records, record_protocol_card

HUMAN = "4c5d6e7f-8091-a2b3-c4d5-e6f708192a3b-data"
# Two fixture games the importer's rules exclude (a dropout; a night without a mafia vote), pinned beside H as a
# study's list pins the inferred human games.
EXCLUDED = ("b2c3d4e5f60718293a4b5c6d7e8f90a1-data", "d4e5f60718293a4b5c6d7e8f90a1b2c3-data")
FIXTURES = Path(__file__).parents[1] / "fixtures" / "datasets"
EVIL = "<script>alert('detector')</script> & <b>bold</b>"


@pytest.mark.slow
def test_detector_page_and_cleansed_transcripts(tmp_path: Path) -> None:
    records = []
    for seed in (2, 3):  # seed 2 has a mafia night chat to leave out
        spec = GameSpec.build(f"det-{seed}", "async", {"day_seconds": 40, "night_seconds": 20, "n_players": 8}, seed,
                              {"default": "scripted/naive"}, design={"experiment": "det", "cell": "c",
                                                                     "game_index": seed})
        records.append(asyncio.run(play_game(spec, BackendPool())))
    events = records[0].events
    i = next(i for i, e in enumerate(events) if e.type == "message" and e.phase == "day")
    events[i] = dataclasses.replace(events[i], text=EVIL)  # as a model might write it
    db, out = tmp_path / "w.duckdb", tmp_path / "dashboards"
    con = connect(db)
    load_records(con, records)
    run_import("dallinger", FIXTURES / "dallinger" / HUMAN, con)  # the valid real-shaped human game
    for folder in EXCLUDED:
        run_import("dallinger", FIXTURES / "dallinger" / folder, con)
    pinned = tuple("ibraheem2022-human-" + f.removesuffix("-data") for f in (HUMAN, *EXCLUDED))
    # the shipped study's card says which human games its detector reads: an inferred set (issue 35 item 4)
    card = protocol_card(load_experiment(Path(__file__).parents[2] / "experiments" / "hidden_in_plain_text.toml"))
    assert card is not None
    record_protocol_card(con, card.experiment, rows_for_warehouse(card))
    con.close()
    report = run_detection(db, DetectorSpec(models=("policy/most-voted", "policy/random"), imported_games=pinned))
    assert report.landed == report.planned > 0
    con = connect(db)
    build_warehouse(con)
    con.execute("checkpoint")
    # The dataset profile covers the async games beside the human ones (metrics.md §9).
    profile = {r[0]: r for r in con.execute(
        "select source, games, participants_max, days_mean, utterances_per_game, words_per_utterance, variant "
        "from mart_dataset_profile").fetchall()}
    sim = profile["simulation"]
    assert sim[1] == 2 and sim[2] == 8 and sim[3] >= 1 and sim[4] > 5 and sim[5] > 1 and sim[6] == "async"
    assert profile["ibraheem2022-human"][1] >= 1
    con.close()
    assert main(["dashboards", "--warehouse", str(db), "--out", str(out)]) == 0
    page = (out / "detector.html").read_text(encoding="utf-8")
    assert ("Which human games (hidden-in-plain-text): <strong>25 valid by the importer&#39;s rules + 3 inferred"
            in page) and "not the paper's set" in page
    for fragment in ("policy/most-voted", "policy/random", "LLM (simulated): det", "human (Dallinger)",
                     "whole game", "day 1", "(1/28)", "ibraheem2022-human"):  # n = 8, k = 2: 1/C(8, 2) = 1/28
        assert fragment in page, fragment
    assert 'class="vis"' in page  # the chart is placed
    # The paper's Tables I-III in its layout, for the simulated and the human games, and as CSV beside the page.
    for fragment in ("Table I: dataset metrics", "Mean words per utterance", "Table II: single-match accuracies",
                     "Table III: exact-match accuracies", "<td>Average</td>", "Random (human (Dallinger))",
                     "Random (LLM (simulated): det)", 'href="detector.tables.csv"'):
        assert fragment in page, fragment
    tables = (out / "detector.tables.csv").read_text(encoding="utf-8").splitlines()
    assert tables[0].startswith("detector,prompt_version,prompt_sha256,source,study,source_label,row_label,day,")
    assert sum(",Average," in line for line in tables) == 6  # 2 detectors x (simulated, human read, human valid)
    datasets = (out / "detector.datasets.csv").read_text(encoding="utf-8").splitlines()
    assert len(datasets) == 4 and "human (Dallinger),1,9,9.0,9" in "".join(datasets)
    # The human games valid by the importer's rules beside every human game read, each column labelled (issue 35
    # item 4): in Tables I-III, and their Random columns.
    valid = '<span class="game-set">1 game valid by the importer&#39;s rules</span>'
    read = ('<span class="game-set">3: 1 + 2 the importer&#39;s rules exclude (read by a game list or '
            '--include-invalid)</span>')
    assert page.count(valid) == page.count(read) == 1 + 2 * 2 * 2  # Table I; Tables II, III x 2 detectors x 2
    assert page.index(valid) < page.index(read)
    href = cleansed_path("det-2")
    assert f'href="{href}"' in page
    cleansed = (out / href).read_text(encoding="utf-8")
    assert "--- Day 1 ---" in cleansed and "voted out." in cleansed
    assert "&lt;script&gt;alert(&#39;detector&#39;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in cleansed
    assert "<script>alert" not in cleansed
    # What the detector read carries no role and no night chat: the page shows only the cleansed lines.
    body = cleansed.split('<ol class="log cleansed">', 1)[1].split("</ol>", 1)[0]
    assert not re.search(r"\b(mafioso|bystander|villager|detective)\b", body, re.I)
    night = [e.text for e in records[0].events if e.type == "mafia_message" and e.text]
    assert night and not any(html.escape(t) in body for t in night if len(t) > 20)

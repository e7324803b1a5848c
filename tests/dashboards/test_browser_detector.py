"""The offline Hidden-in-Plain-Text demo in a real browser (headless Debian chromium over the DevTools protocol):
`mafiabench run experiments/hidden_in_plain_text_offline.toml --publish` (4 games of its 8) plays the async games,
imports the human fixture, runs the scripted detectors, builds and renders; the comparison page's table holds both
sources with the exact baselines, its chart draws points, intervals and baseline ticks for both sources and redraws
when the metric changes, and a game's link opens exactly the cleansed transcript the detector read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mafiabench.cli import main
from support.browser import CHROMIUM, DRAWN, Page

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")]

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "experiments" / "hidden_in_plain_text_offline.toml"


GAMES = 4  # of the demo's 8: one shard, every page and table the tests read (the async games are most of the cost)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("detector-demo")
    out = folder / "dashboards"
    text = DEMO.read_text()
    assert "games_per_cell = 8\n" in text and 'path = "../tests/fixtures/datasets/dallinger"' in text
    text = text.replace("games_per_cell = 8\n", f"games_per_cell = {GAMES}\n")
    demo = folder / DEMO.name  # the import's path is relative to the experiment file: ours names the checkout's
    demo.write_text(text.replace('"../tests/', f'"{ROOT}/tests/'))
    # the experiment's warehouse is relative to the experiment file, in the checkout: ours goes to the test's folder
    assert main(["run", str(demo), "--no-prefect", "--no-progress", "--publish", "--dashboards", str(out),
                 "--warehouse", str(folder / "w.duckdb")]) == 0
    yield out


CELLS = """Array.from(document.querySelectorAll('table.detector-accuracy')).map(t =>
    Array.from(t.querySelectorAll('tbody tr')).map(r => Array.from(r.cells).map(c => c.textContent.trim())))"""
MARKS = "document.querySelectorAll('.vis svg .mark-symbol.role-mark path').length"
RULES = "document.querySelectorAll('.vis svg .mark-rule.role-mark line').length"
TICKS = "document.querySelectorAll('.vis svg .mark-rect.role-mark path').length"
SERIES = """Array.from(document.querySelectorAll('.vis svg .role-legend .role-legend-label text'))
    .map(t => t.textContent)"""


def test_comparison_page_of_the_offline_demo(site: Path, tab: Page) -> None:
    tab.goto((site / "detector.html").as_uri())
    assert tab.wait_for(f"({DRAWN}) === 1")
    tables = tab.eval(CELLS)
    assert len(tables) == 2  # one table per detector: policy/most-voted, policy/random
    for rows in tables:
        sources = {r[0] for r in rows}
        assert "human (Dallinger)" in sources
        assert any(s.startswith("LLM (simulated): hidden-in-plain-text-offline") for s in sources)
        sim = [r for r in rows if r[0].startswith("LLM (simulated)")]
        assert [r[1] for r in sim][:2] == ["whole game", "day 1"]
        for r in sim:  # games, rates, intervals, and the exact baseline of 10 players, 2 mafia
            assert int(r[2]) >= 1 and r[3].endswith("%") and r[4].startswith("[")
            assert r[7] == "37.8% (17/45)" and r[8] == "2.2% (1/45)"
        whole = next(r for r in sim if r[1] == "whole game")
        assert whole[2] == str(GAMES)  # every simulated game once
    # The chart shows the first detector (policy/most-voted): per day and source, a point, an interval and a tick.
    per_day = sum(1 for r in tables[0] if r[1].startswith("day "))
    assert per_day >= 3
    assert tab.eval(MARKS) == per_day
    assert tab.eval(RULES) == per_day and tab.eval(TICKS) == per_day  # Wilson intervals and baseline ticks
    assert sorted(tab.eval(SERIES)) == sorted({r[0] for r in tables[0]})  # a colour per source
    before = tab.eval("document.querySelector('.vis svg').innerHTML")
    assert tab.eval(
        """(() => { const s = Array.from(document.querySelectorAll('.vega-bindings select'))
               .find(s => Array.from(s.options).some(o => o.value.startsWith('exact')));
           s.value = Array.from(s.options).find(o => o.value.startsWith('exact')).value;
           s.dispatchEvent(new Event('change')); return true; })()"""
    )
    assert tab.wait_for(f"document.querySelector('.vis svg').innerHTML !== {before!r}".replace("\n", " "))
    assert tab.eval(MARKS) == per_day
    assert tab.errors() == []


def test_a_game_opens_the_cleansed_transcript_the_detector_read(site: Path, tab: Page) -> None:
    tab.goto((site / "detector.html").as_uri())
    href = tab.eval("document.querySelector('table.detector-games a.cleansed').getAttribute('href')")
    tab.events = [e for e in tab.events if e["method"] != "Page.loadEventFired"]
    tab.eval("document.querySelector('table.detector-games a.cleansed').click()")
    tab.wait_event("Page.loadEventFired")
    assert tab.eval("location.href") == (site / href).resolve().as_uri()
    assert tab.eval("document.querySelector('h1').textContent").startswith("What the detector read: ")
    assert tab.eval("document.querySelectorAll('ol.cleansed li.phase').length") >= 1
    assert tab.eval("document.querySelectorAll('ol.cleansed li.line').length") >= 10
    assert tab.eval("document.querySelectorAll('table.detections tbody tr').length") >= 2
    assert tab.errors() == []


LEFT_OUT = """[...document.querySelectorAll('table.left-out-games tbody tr, table.unreadable-games tbody tr')]
    .map(r => [...r.cells].map(c => c.textContent.trim()))"""


def test_the_games_left_out_are_named_with_why(site: Path, tab: Page) -> None:
    """The study said "2 unreadable" and "9 games read" and named none of the games it left out (issue 40 item 5):
    the page lists the human games the detector did not read and those the import could not read, with why."""
    tab.goto((site / "detector.html").as_uri())
    rows = tab.eval(LEFT_OUT)
    human = "ibraheem2022-human"
    assert [r[:3] for r in rows[:5]] == [
        [f"{human}-0a1b2c3d4e5f60718293a4b5c6d7e8f9", human, "invalid: outside the study's protocol"],
        [f"{human}-a1b2c3d4e5f60718293a4b5c6d7e8f90", human, "invalid: outside the study's protocol"],
        [f"{human}-b2c3d4e5f60718293a4b5c6d7e8f90a1", human, "invalid: technical failure"],
        [f"{human}-c3d4e5f60718293a4b5c6d7e8f90a1b2", human, "did not finish (status unfinished: no winner recorded)"],
        [f"{human}-d4e5f60718293a4b5c6d7e8f90a1b2c3", human, "invalid: no votes cast"],
    ]
    assert [r[:3] for r in rows[5:]] == [
        [human, "e5f60718293a4b5c6d7e8f90a1b2c3d4-data", "e5f60718293a4b5c6d7e8f90a1b2c3d4-data/node.csv row id=2: "
         "field type must be source, mafioso or bystander, got 'wizard'"],
        [human, "f60718293a4b5c6d7e8f90a1b2c3d4e5-data", "f60718293a4b5c6d7e8f90a1b2c3d4e5-data: info.csv missing"],
    ]

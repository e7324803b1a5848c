"""From every figure to its games, in a real browser (headless Debian chromium over the DevTools protocol): a click on
a capability bar opens the list of exactly the games behind it, a game there opens its transcript; the list filters
in the page; a failed game's page says what failed and when; a format failure shows the model's raw answer.

The site is a small study of its own with one game that fails for good (a model whose every call errors).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from urllib.parse import parse_qs, unquote, urljoin, urlparse

import duckdb
import pytest

from mafiabench import publish as transform
from mafiabench.agents.llm import ModelSettings
from mafiabench.backends.endpoints import EndpointConfig
from mafiabench.backends.fake import MALFORMED_ANSWER
from mafiabench.cli import main
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.record import GameRecord
from mafiabench.warehouse import raw as warehouse
from support.browser import CHROMIUM, DRAWN, N_CHARTS, Page
from support.dashboards import study_records

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")]

FAILED_GAME = "dash.broken.000"


def failed_record() -> GameRecord:
    """A game whose detective's model errors on every call: landed as failed, with the call that failed."""
    pool = BackendPool(endpoints={"broken": EndpointConfig("broken", "fake", options={"p_server_error": 1.0})})
    agents = {"mafioso": "policy/random", "villager": "policy/random", "detective": "broken/model"}
    spec = GameSpec.build(FAILED_GAME, "mini-mafia", None, 99, agents,
                          design={"experiment": "dash", "cell": "broken", "game_index": 0})
    spec.models = {"broken/model": ModelSettings(max_attempts=2, backoff_base_s=0.0)}
    return asyncio.run(play_game(spec, pool))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("games-site")
    db, out = folder / "w.duckdb", folder / "dashboards"
    records = [*study_records(2), failed_record()]
    con = warehouse.connect(db)
    try:
        warehouse.load_records(con, records)
        transform.build_warehouse(con)
        con.execute("checkpoint")
    finally:
        con.close()
    assert main(["dashboards", "--warehouse", str(db), "--out", str(out)]) == 0
    return out


def click(tab: Page, x: float, y: float) -> None:
    tab.events = [e for e in tab.events if e["method"] != "Page.loadEventFired"]
    for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
        tab.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})


def shown_games(tab: Page) -> list[str]:
    return tab.eval(
        "Array.from(document.querySelectorAll('table.games tbody tr')).filter(tr => !tr.hidden)"
        ".map(tr => JSON.parse(tr.querySelector('script.game-meta').textContent).game)"
    )


def test_from_a_capability_bar_to_its_games_to_a_transcript(site: Path, tab: Page) -> None:
    tab.goto((site / "capability-deceive.html").as_uri())
    assert tab.wait_for(f"({DRAWN}) === ({N_CHARTS}) && ({DRAWN}) > 0")
    # A point of the first bar (Vega draws each bar as a path in a mark-rect group), off its middle line, where the
    # error bar's rule would catch the click instead.
    box = tab.eval("(() => { const r = Array.from(document.querySelectorAll('.vis svg .mark-rect path'))"
                   ".map(p => p.getBoundingClientRect()).sort((a, b) => b.width - a.width)[0];"
                   " return [r.x + Math.min(4, r.width / 2), r.y + r.height * 0.2]; })()")
    click(tab, *box)
    tab.wait_event("Page.loadEventFired")
    url = urlparse(tab.eval("location.href"))
    assert url.path.endswith("/transcripts/index.html"), url
    params = {k: v[0] for k, v in parse_qs(unquote(url.fragment)).items()}
    cell = params["bar"]  # the design's cell name: deceive|<target>|<background>, or homogeneous|<model>
    assert cell.split("|")[0] in ("deceive", "homogeneous") and params["study"] == "dash"
    games = shown_games(tab)
    # Exactly the games of that cell (their ids are made from it); a homogeneous cell is played once for all three
    # capabilities.
    expected = {f"dash.{re.sub(r'[^A-Za-z0-9]+', '-', cell)}.{i:03d}" for i in range(2)}
    assert set(games) == expected, (params, games)
    total = tab.eval("document.querySelectorAll('table.games tbody tr').length")
    assert tab.eval("document.getElementById('game-count').textContent") == f"2 of {total} games shown"
    tab.events = [e for e in tab.events if e["method"] != "Page.loadEventFired"]
    tab.eval("Array.from(document.querySelectorAll('table.games tbody tr')).find(tr => !tr.hidden)"
             ".querySelector('a').click()")
    tab.wait_event("Page.loadEventFired")
    assert tab.eval("document.querySelector('h1').textContent") == f"Game {sorted(games)[0]}"
    assert tab.errors() == []


# Every bar (Vega's SVG renderer keeps each drawn item on its element): where it links, and what it stands for.
BARS = """Array.from(document.querySelectorAll('.vis svg .mark-rect path')).map(p => p.__data__)
    .filter(d => d && d.href).map(d => ({href: d.href, study: d.datum.study, target: d.datum.target_model,
                                         background: d.datum.background}))"""


def test_every_capability_bar_leads_to_exactly_the_games_of_the_cell_it_names(site: Path, tab: Page) -> None:
    """A bar's games list named its cell `deceive|fake/alpha|fake/beta` while the rows it listed said
    `deceive|fake/beta|fake/alpha` (issue 31 item 7). For every bar of the three capability pages: the list shows
    exactly the games of the bar's (study, capability, target, background), the name it says it followed is the
    cell every one of those games was played in, and a homogeneous bar leads to the one cell of all three."""
    db = site.parent / "w.duckdb"
    con = duckdb.connect(str(db), read_only=True)
    try:
        behind = con.execute("select study, capability, target_model, background, list(game_id order by game_id) "
                             "from mart_capability_games group by all").fetchall()
        cell_of = dict(con.execute("select game_id, cell from fct_games").fetchall())
    finally:
        con.close()
    games_of = {tuple(k[:4]): k[4] for k in behind}
    checked = 0
    for capability in ("deceive", "detect", "disclose"):
        page = site / f"capability-{capability}.html"
        tab.goto(page.as_uri())
        assert tab.wait_for(f"({DRAWN}) === ({N_CHARTS}) && ({DRAWN}) > 0")
        bars = {b["href"]: b for b in tab.eval(BARS)}.values()  # a bar is drawn in two parts, one link
        assert len(bars) >= 6, capability
        for bar in bars:
            expected = games_of[(bar["study"], capability, bar["target"], bar["background"])]
            tab.goto("about:blank")
            tab.goto(urljoin(page.as_uri(), bar["href"]))
            games = shown_games(tab)
            assert sorted(games) == expected, (capability, bar)
            named = tab.eval("document.getElementById('active-filter').textContent")
            cells = {cell_of[g] for g in games}
            assert len(cells) == 1 and named.endswith(f"bar = {cells.pop()}"), (capability, bar, named)
            checked += 1
    assert checked >= 18
    assert tab.errors() == []


def test_the_games_list_filters_in_the_page(site: Path, tab: Page) -> None:
    tab.goto((site / "transcripts" / "index.html").as_uri())
    total = tab.eval("document.querySelectorAll('table.games tbody tr').length")
    assert total == len(shown_games(tab)) > 20
    tab.eval("(() => { const s = document.querySelector('select[name=flag]'); s.value = 'format failure';"
             " s.dispatchEvent(new Event('input', {bubbles: true})); })()")
    flagged = shown_games(tab)
    assert 0 < len(flagged) < total
    metas = tab.eval("Array.from(document.querySelectorAll('table.games tbody tr')).filter(tr => !tr.hidden)"
                     ".map(tr => JSON.parse(tr.querySelector('script.game-meta').textContent).flags)")
    assert all("format failure" in f for f in metas)
    tab.eval("(() => { const i = document.querySelector('input[name=q]'); i.value = 'homogeneous';"
             " i.dispatchEvent(new Event('input', {bubbles: true})); })()")
    narrowed = shown_games(tab)
    assert set(narrowed) <= set(flagged) and all("homogeneous" in g for g in narrowed)
    tab.eval("document.getElementById('clear-filters').click()")
    assert len(shown_games(tab)) == total
    tab.eval("(() => { const s = document.querySelector('select[name=outcome]'); s.value = 'failed';"
             " s.dispatchEvent(new Event('input', {bubbles: true})); })()")
    assert shown_games(tab) == [FAILED_GAME]
    assert tab.errors() == []


def test_a_failed_games_page_says_what_failed_and_when(site: Path, tab: Page) -> None:
    tab.goto((site / "transcripts" / f"{FAILED_GAME}.html").as_uri())
    outcome = tab.eval("document.querySelector('table.facts tr td:nth-child(2)').textContent")
    assert outcome.startswith("failed: the ") and "failed for good after 2 attempts (server_error)" in outcome
    assert "broken/model" in outcome and "started 20" in outcome and "outcome failed ()" not in outcome
    won = tab.eval("Array.from(document.querySelectorAll('h2 + .table-wrap tbody tr td:last-child'))"
                   ".map(td => td.textContent)")
    assert won and all(w == "– (no result)" for w in won)
    assert tab.errors() == []


def test_a_format_failure_shows_the_models_raw_answer(site: Path, tab: Page) -> None:
    page = next(p for p in (site / "transcripts").glob("*.html") if "raw-answer" in p.read_text(encoding="utf-8"))
    tab.goto(page.as_uri())
    tab.eval("document.querySelector('details.raw-answer').open = true")
    raw = tab.eval("document.querySelector('details.raw-answer pre').textContent")
    assert raw in (MALFORMED_ANSWER, "(empty answer)")  # what the flaky fake model answered, verbatim
    assert tab.eval("document.querySelector('details.raw-answer').closest('li').textContent.includes('format failure')")
    assert tab.errors() == []

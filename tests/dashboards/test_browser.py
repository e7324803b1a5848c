"""The dashboards in a real browser: headless Debian chromium opens every page from file:// (no network), every
chart draws, no console error or uncaught exception, a dropdown re-filters a chart, a link from the exceptional
games leads to a transcript, and a message holding a script tag shows as text. A screenshot of the index is saved
under test-artifacts/ for a person to look at.

The first screen of every overview page is compared, downscaled, with the same page of the previous build of the same
data, and a build with planted broken charts (a chart whose parameter went missing, a chart whose field was renamed)
is shown to differ on exactly those pages.

Chromium is driven through the DevTools protocol (the `websockets` package) rather than scraping its log: events
say exactly which page raised what.
"""

from __future__ import annotations

import io
import shutil
from base64 import b64decode
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import duckdb
import pytest
from PIL import Image, ImageChops

from mafiabench.dashboards import charts, render_dashboards
from mafiabench.dashboards.html import Page as HtmlPage
from mafiabench.dashboards.html import render_page
from support.browser import CHROMIUM, DRAWN, N_CHARTS, Page

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium is not installed (Debian: apt-get install chromium; `make browser` does it); CI has it",
    ),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dashboards of test_dashboards' small study (built once per session, shared by both files)."""
    from support.dashboards import shared_site

    return shared_site(tmp_path_factory)[1]


def test_every_page_opens_without_errors_and_draws_its_charts(site: Path, tab: Page) -> None:
    total_charts = 0
    for page in sorted(site.rglob("*.html")):
        tab.goto(page.as_uri())
        n = tab.eval(N_CHARTS)
        if n:
            drawn = tab.wait_for(f"({DRAWN}) === ({N_CHARTS}) && ({DRAWN})")
            assert drawn == n, f"{page.name}: {tab.eval(DRAWN)} of {n} charts drawn"
            marks = tab.eval("document.querySelectorAll('.vis svg .mark-rect path, .vis svg .mark-symbol path, "
                             ".vis svg .mark-rule line').length")
            assert marks > 0, f"{page.name}: charts have no marks"
            total_charts += n
        assert tab.errors() == [], page.relative_to(site)
    assert total_charts >= 12


# Per chart, its data marks (Vega's `role-mark` groups, not axes or legends) that show something: a bar with an area
# (a bar of width 0 draws nothing), any other mark with a width or a height.
CHARTS_WITHOUT_VISIBLE_MARKS = """Array.from(document.querySelectorAll('.vis')).filter(v => {
    const marks = Array.from(v.querySelectorAll('svg g.role-mark path, svg g.role-mark line'));
    return !marks.some(e => { const b = e.getBBox();
        return e.closest('.mark-rect') ? b.width > 0.5 && b.height > 0.5 : b.width > 0.5 || b.height > 0.5; });
}).map(v => v.id)"""


def test_no_chart_is_an_empty_frame(site: Path, tab: Page) -> None:
    """The costs page drew its money chart with every bar at US$ 0 when nothing was priced (issue 31 item 7): an
    empty frame. Every chart of every page shows at least one mark with an area; the costs page says instead why
    there is no money chart."""
    for page in sorted(site.glob("*.html")):
        tab.goto(page.as_uri())
        if tab.eval(N_CHARTS):
            tab.wait_for(f"({DRAWN}) === ({N_CHARTS}) && ({DRAWN})")
            assert tab.eval(CHARTS_WITHOUT_VISIBLE_MARKS) == [], page.name
    tab.goto((site / "costs.html").as_uri())
    assert tab.eval("(document.querySelector('#chart-cost') !== null) !== "
                    "(document.querySelector('p.money-note') !== null)")  # the chart (with marks, above) or the note


def test_no_page_runs_off_the_right_edge(site: Path, tab: Page) -> None:
    """The data-quality table ran off the right edge (issue 31 item 7): no element of any page's main column ends
    past the window's right edge, scrolled inside a box or not."""
    past = ("Array.from(document.querySelectorAll('main *')).filter(e => e.getBoundingClientRect().right > "
            "document.documentElement.clientWidth + 1).map(e => e.tagName + '.' + e.className).slice(0, 5)")
    for page in sorted(site.glob("*.html")):
        tab.goto(page.as_uri())
        assert tab.eval(past) == [], page.name
        assert tab.eval("document.documentElement.scrollWidth <= document.documentElement.clientWidth"), page.name


# Per chart, each axis title whose box meets the box of one of its own axis's labels still drawn (Vega hides
# labels that would overlap each other by making them transparent).
AXIS_TITLES_OVER_LABELS = """Array.from(document.querySelectorAll('.vis svg g.role-axis')).flatMap(axis => {
    const box = e => e.getBoundingClientRect();
    const meet = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5
                           && b.top < a.bottom - 0.5;
    const labels = Array.from(axis.querySelectorAll('.role-axis-label text'))
        .filter(t => t.textContent && t.getAttribute('opacity') !== '0' && getComputedStyle(t).opacity !== '0');
    return Array.from(axis.querySelectorAll('.role-axis-title text')).flatMap(title => labels
        .filter(l => meet(box(title), box(l)))
        .map(l => axis.closest('.vis').id + ': "' + title.textContent + '" over "' + l.textContent + '"'));
})"""


def test_no_axis_title_is_drawn_over_its_labels(site: Path, tab: Page) -> None:
    """The exceptional games' y-axis title was drawn over the game ids (issue 31 item 7): on every chart of every
    page, no axis title meets a label of its axis."""
    axes = 0
    for page in sorted(site.glob("*.html")):
        tab.goto(page.as_uri())
        if tab.eval(N_CHARTS):
            tab.wait_for(f"({DRAWN}) === ({N_CHARTS}) && ({DRAWN})")
            assert tab.eval(AXIS_TITLES_OVER_LABELS) == [], page.name
            axes += tab.eval("document.querySelectorAll('.vis svg g.role-axis .role-axis-title text').length")
    assert axes >= 20


def test_the_exceptional_games_chart_counts_flagged_games_and_each_bar_leads_to_them(
    site: Path, study: Path, tab: Page
) -> None:
    """All 17 points of the exceptional games' chart sat at one surprise value, saying nothing (issue 31 item 7): a
    rule gives every game it flags in a cell the same surprise. The chart counts the flagged games per cell and
    rule, and each bar opens the games list showing exactly those games."""
    con = duckdb.connect(str(study), read_only=True)
    try:
        flagged = con.execute("select study, cell, rule, list(distinct game_id order by game_id) "
                              "from mart_exceptional_games group by all").fetchall()
    finally:
        con.close()
    games_of = {(s, c, r): g for s, c, r, g in flagged}
    page = (site / "exceptional-games.html").as_uri()
    tab.goto(page)
    tab.wait_for(f"({DRAWN}) === ({N_CHARTS}) && ({DRAWN})")
    bars = tab.eval("""Array.from(document.querySelectorAll('#chart-flagged svg .mark-rect path'))
        .map(p => p.__data__).map(d => ({href: d.href, games: d.datum.games, study: d.datum.study,
                                          cell: d.datum.cell, rule: d.datum.rule}))""")
    assert len(bars) == len(games_of) and {(b["study"], b["cell"], b["rule"]) for b in bars} == set(games_of)
    assert len({b["games"] for b in bars}) > 1  # the counts differ: the chart says something
    for bar in bars:
        expected = games_of[(bar["study"], bar["cell"], bar["rule"])]
        assert bar["games"] == len(expected)
        tab.goto("about:blank")
        tab.goto(urljoin(page, bar["href"]))
        shown = tab.eval("Array.from(document.querySelectorAll('table.games tbody tr')).filter(tr => !tr.hidden)"
                         ".map(tr => JSON.parse(tr.querySelector('script.game-meta').textContent).game)")
        assert sorted(shown) == expected, bar
    assert tab.errors() == []


def test_format_failures_are_drawn_on_an_axis_zoomed_to_them(site: Path, tab: Page) -> None:
    """Format-failure rates of a few percent were squashed against the left of a 0-100% axis (issue 31 item 7): the
    axis ends at the next tenth above the highest interval."""
    tab.goto((site / "failures.html").as_uri())
    tab.wait_for(f"({DRAWN}) === ({N_CHARTS})")
    labels = tab.eval("Array.from(document.querySelectorAll('#chart-format .role-axis-label text'))"
                      ".map(t => t.textContent).filter(t => t.endsWith('%'))")
    assert labels and "100%" not in labels, labels


def test_a_dropdown_refilters_a_chart(site: Path, tab: Page) -> None:
    """Win rates grouped by the mafioso's model instead of the cell: a Vega-Lite parameter bound to a select."""
    tab.goto((site / "win-rates.html").as_uri())
    tab.wait_for(f"({DRAWN}) === 1")
    label = "Array.from(document.querySelectorAll('.vis svg text')).some(t => t.textContent === 'flaky/beta')"
    assert tab.eval(label) is False  # grouped by cell, labels are whole cell names
    assert tab.eval(
        """(() => { const s = Array.from(document.querySelectorAll('.vega-bindings select'))
               .find(s => Array.from(s.options).some(o => o.value === 'model_as_mafioso'));
           s.value = 'model_as_mafioso'; s.dispatchEvent(new Event('change'));
           return true; })()"""
    )
    assert tab.wait_for(label)
    assert tab.errors() == []


def test_an_exceptional_game_links_to_its_transcript(site: Path, tab: Page) -> None:
    tab.goto((site / "exceptional-games.html").as_uri())
    first = tab.eval("document.querySelector('table.exceptional a').getAttribute('href')")
    tab.events = [e for e in tab.events if e["method"] != "Page.loadEventFired"]
    tab.eval("document.querySelector('table.exceptional a').click()")
    tab.wait_event("Page.loadEventFired")
    assert tab.eval("location.href") == (site / first).resolve().as_uri()
    assert tab.eval("document.querySelector('h1').textContent") == f"Game {Path(first).stem}"
    assert tab.eval("document.querySelectorAll('ol.log li.vote').length") >= 3
    assert tab.errors() == []


def test_a_message_with_a_script_tag_is_shown_as_text(site: Path, tab: Page) -> None:
    hit = next(p for p in (site / "transcripts").glob("*.html") if "alert(1)" in p.read_text(encoding="utf-8"))
    tab.goto(hit.as_uri())
    shown = "Array.from(document.querySelectorAll('q.says')).some(q => q.textContent.includes('<script>alert(1)'))"
    assert tab.eval(shown)
    assert tab.eval("document.querySelectorAll('main script').length") == 0
    assert tab.errors() == []  # includes "no dialog opened"


def test_chart_tooltips_show_html_as_text(site: Path, tab: Page, tmp_path: Path) -> None:
    """Vega data is data: a reason holding markup appears in the tooltip as text and runs nothing."""
    evil = '<img src=x onerror="window.pwned = 1"><b>bold</b>'
    row = {"study": "s", "cell": evil, "rule": "upset", "games": 2, "flags": 2, "max_surprise": 3.0,
           "cell_games": 2, "link": None}
    page = HtmlPage("tooltip.html", "Tooltip", "charts.html.j2")
    page.add_chart("t", charts.exceptional_chart([row], studies=["s"]))
    shutil.copytree(site / "assets", tmp_path / "assets")
    (tmp_path / "tooltip.html").write_text(render_page(page, nav=[]), encoding="utf-8")
    tab.goto((tmp_path / "tooltip.html").as_uri())
    tab.wait_for(f"({DRAWN}) === 1")
    box = tab.eval("(() => { const r = document.querySelector('.vis .mark-rect path').getBoundingClientRect();"
                   " return [r.x + r.width / 2, r.y + r.height / 2]; })()")
    for dx in (0, 1):
        tab.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": box[0] + dx, "y": box[1]})
    tip = "document.getElementById('vg-tooltip-element')"
    assert tab.wait_for(f"{tip} && {tip}.textContent.includes('onerror')")
    assert tab.eval(f"{tip}.querySelectorAll('img, b').length") == 0
    assert tab.eval("window.pwned === undefined")
    assert tab.errors() == []


def test_screenshot_of_the_index(site: Path, tab: Page) -> None:
    """Saved as test-artifacts/dashboards-index.png for a person to look at."""
    tab.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 1700, "deviceScaleFactor": 1,
                                                    "mobile": False})
    tab.goto((site / "index.html").as_uri())
    assert tab.wait_for(f"({DRAWN}) === ({N_CHARTS})")
    png = b64decode(tab.send("Page.captureScreenshot", {"format": "png"})["data"])
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "dashboards-index.png").write_bytes(png)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    assert tab.errors() == []


# -- first screens compared with the previous build ----------------------------------------------------------------

SCREEN = {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}
LOW = (128, 90)  # a tenth of the first screen: layout and ink, not anti-aliasing or a changed minute in the footer
LEVEL = 24  # a low-resolution pixel "differs" when its grey level moved by more than this (of 255)
SAME = 0.005  # first screens differing in at most 0.5% of the low-resolution pixels are the same page


def first_screen(tab: Page, url: str) -> Image.Image:
    """The first screen of a page once its charts settled (drawn or failed), grey, at low resolution."""
    tab.send("Emulation.setDeviceMetricsOverride", SCREEN)
    tab.goto(url)
    if tab.eval(N_CHARTS):
        assert tab.wait_for("document.body.dataset.charts === 'settled'"), f"{url}: charts never settled"
    png = b64decode(tab.send("Page.captureScreenshot", {"format": "png"})["data"])
    return Image.open(io.BytesIO(png)).convert("L").resize(LOW, Image.Resampling.BOX)


def difference(a: Image.Image, b: Image.Image) -> float:
    """The share of low-resolution pixels whose grey level differs by more than LEVEL."""
    histogram = ImageChops.difference(a, b).histogram()
    return sum(histogram[LEVEL + 1 :]) / (a.width * a.height)


def rebuild(study: Path, out: Path) -> Path:
    """The dashboards rendered again from the same warehouse, as the command line does."""
    con = duckdb.connect(str(study), read_only=True)
    try:
        render_dashboards(con, out)
    finally:
        con.close()
    return out


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from support.dashboards import shared_site

    return shared_site(tmp_path_factory)[0]


@pytest.fixture(scope="module")
def previous_screens(site: Path, tab: Page) -> dict[str, Image.Image]:
    """The first screen of every overview page of the shared build (made by the command line): the previous build."""
    from mafiabench.dashboards.pages import PAGES

    screens = {spec.path: first_screen(tab, (site / spec.path).as_uri()) for spec in PAGES}
    assert tab.errors() == []
    folder = ARTIFACTS / "first-screens"
    folder.mkdir(parents=True, exist_ok=True)
    for path, image in screens.items():
        image.save(folder / (path.replace("/", "-").removesuffix(".html") + ".png"))
    return screens


def test_first_screens_match_the_previous_build(
    study: Path, tab: Page, previous_screens: dict[str, Image.Image], tmp_path: Path
) -> None:
    again = rebuild(study, tmp_path / "again")
    diffs = {path: difference(first_screen(tab, (again / path).as_uri()), previous) for path, previous in
             previous_screens.items()}
    assert tab.errors() == []
    assert len(diffs) >= 12
    changed = {p: round(d, 4) for p, d in diffs.items() if d > SAME}
    assert changed == {}, f"first screens differ from the previous build: {changed}"


def test_a_planted_broken_chart_changes_the_first_screen(
    study: Path, tab: Page, previous_screens: dict[str, Image.Image], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two ways a chart breaks: a parameter its filter reads went missing (Vega refuses to draw it), and the field
    its bars encode was renamed by a query (the chart draws axes and error bars but no bars)."""
    win_rate_chart, capability_chart = charts.win_rate_chart, charts.capability_chart

    def missing_parameter(*args: Any, **kwargs: Any) -> dict[str, Any]:
        spec = win_rate_chart(*args, **kwargs)
        spec["params"] = [p for p in spec["params"] if p["name"] != "dimension"]
        return spec

    def renamed_field(rows: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        renamed = [{("wins" if k == "k" else k): v for k, v in r.items()} for r in rows]
        return capability_chart(renamed, *args, **kwargs)

    monkeypatch.setattr(charts, "win_rate_chart", missing_parameter)
    monkeypatch.setattr(charts, "capability_chart", renamed_field)
    broken = rebuild(study, tmp_path / "broken")
    diffs = {path: difference(first_screen(tab, (broken / path).as_uri()), previous_screens[path])
             for path in ("index.html", "win-rates.html", "capability-deceive.html", "capability-detect.html")}
    errors = tab.errors()
    assert any("dimension" in e for e in errors), errors  # Vega's own complaint about the missing parameter
    assert diffs["win-rates.html"] > 4 * SAME, diffs
    assert diffs["capability-deceive.html"] > 4 * SAME, diffs
    assert diffs["capability-detect.html"] > 4 * SAME, diffs
    assert diffs["index.html"] <= SAME, diffs


def test_the_offline_strategema_page_draws_its_chart_and_tables(
    tmp_path_factory: pytest.TempPathFactory, tab: Page
) -> None:
    """experiments/strategema_offline.toml (two games a cell) and a uniform-belief study in one warehouse, played,
    built and rendered: its page draws one chart per study, one point and interval per condition of the main arm,
    and shows the three tables of each study."""
    from support.strategema import offline_study

    _, out, _ = offline_study(tmp_path_factory)
    tab.goto((out / "strategema.html").as_uri())
    assert tab.wait_for(f"({DRAWN}) === ({N_CHARTS}) && ({DRAWN})") == 2
    points = tab.eval("document.querySelectorAll('.vis svg .mark-symbol path').length")
    assert points == 10 + 4  # offline: four baselines, four without speaking, two ablations; uniform: four baselines
    heads = tab.eval("Array.from(document.querySelectorAll('h3')).map(h => h.textContent)")
    assert "Table 3: Ablations on the 8-player, 2-Mafia configuration" in heads
    ablation_rows = tab.eval(
        """(() => { const h = Array.from(document.querySelectorAll('h3'))
                                 .find(h => h.textContent.startsWith('Table 3'));
           return h.nextElementSibling.nextElementSibling.querySelectorAll('tbody tr').length; })()"""
    )
    assert ablation_rows == 4
    assert tab.errors() == []

"""Page defects a newcomer met (issue 40 item 5), each read in a real browser (headless Debian chromium, as
test_browser.py drives it) on the dashboards of test_dashboards' small study."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.browser import CHROMIUM, Page

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from support.dashboards import shared_site

    return shared_site(tmp_path_factory)[1]


PRICED_COLUMN = """(() => { const table = Array.from(document.querySelectorAll('table')).find(t =>
    Array.from(t.querySelectorAll('th')).some(th => th.textContent.trim() === 'priced'));
  const i = Array.from(table.querySelectorAll('th')).findIndex(th => th.textContent.trim() === 'priced');
  return Array.from(table.querySelectorAll('tbody tr')).map(r => r.children[i].textContent.trim()); })()"""


def test_the_cost_page_never_says_priced_beside_no_price(site: Path, tab: Page) -> None:
    """It said "priced: yes" for every model beside "no model call has a price": the fakes are priced, at US$ 0."""
    tab.goto((site / "costs.html").as_uri())
    priced = tab.eval(PRICED_COLUMN)
    note = tab.eval("(document.querySelector('p.money-note') || {}).textContent || ''")
    assert priced and note, (priced, note)
    if "yes" in priced:
        assert "no model call has a price" not in note, note
    if all(p == "yes" for p in priced):
        assert "priced at US$ 0" in note, note


@pytest.mark.parametrize(("page", "folder"), [("strategema.html", "dashboards-strategema-offline/"),
                                              ("detector.html", "dashboards-hidden-in-plain-text-offline/")])
def test_an_empty_page_that_names_a_command_says_where_its_pages_go(
    site: Path, tab: Page, page: str, folder: str
) -> None:
    """The demo's Belief and Detector pages pointed to a command that writes into another warehouse and folder,
    without saying so: run it, and these pages stay empty."""
    tab.goto((site / page).as_uri())
    text = tab.eval("document.querySelector('main').innerText")
    assert "--publish" in text, text[:2000]  # the small study has no multi-night game and no detection
    assert folder in text and "not these" in text, text[:2000]


def test_the_belief_pages_columns_read_in_the_order_of_their_numbers(tmp_path: Path, tab: Page) -> None:
    """The Strategema chart's columns sorted as text (N=10, N=12, N=6, N=8): drawn in chromium, they read N=6, N=8,
    N=10, N=12 from left to right."""
    import json

    from mafiabench.dashboards import charts
    from mafiabench.dashboards.render import vega_bundle

    rows = [{"n_players": n, "n_mafia": m, "setting": f"N={n}, M={m}", "configuration": "baseline", "k": 3, "n": 10,
             "rate": 0.3, "laplace_mean": 0.33, "wilson_low": 0.1, "wilson_high": 0.6}
            for n, m in ((10, 3), (12, 3), (6, 2), (8, 2))]
    spec = charts.strategema_chart(rows)
    page = tmp_path / "chart.html"
    bundle = tmp_path / "vega.js"  # the pages' own local Vega bundle, as the render writes it
    bundle.write_text(vega_bundle(), encoding="utf-8")
    page.write_text(f'<html><body><div id="c"></div><script src="vega.js"></script><script>'
                    f'vegaEmbed("#c", {json.dumps(spec)}, {{renderer: "svg", actions: false}});</script></body></html>')
    tab.goto(page.as_uri())
    tab.wait_for("document.querySelectorAll('#c svg .role-column-header text').length === 4")
    headers = tab.eval("Array.from(document.querySelectorAll('#c svg .role-column-header text'))"
                       ".map(t => [t.getBoundingClientRect().left, t.textContent])"
                       ".sort((a, b) => a[0] - b[0]).map(x => x[1])")
    assert headers == ["N=6, M=2", "N=8, M=2", "N=10, M=3", "N=12, M=3"]


HIDDEN_Y_LABELS = """Array.from(document.querySelectorAll('.vis svg g.role-axis')).filter(a =>
    a.getAttribute('aria-label') && a.getAttribute('aria-label').startsWith('Y-axis')).flatMap(a =>
    Array.from(a.querySelectorAll('.role-axis-label text')).map(t => [t.textContent,
        t.getAttribute('opacity') === '0' || getComputedStyle(t).opacity === '0']))"""


def draw(spec: dict, tmp_path: Path, tab: Page) -> None:  # type: ignore[type-arg]
    """A chart spec drawn alone in chromium, with the pages' own local Vega bundle."""
    import json

    from mafiabench.dashboards.render import vega_bundle

    (tmp_path / "vega.js").write_text(vega_bundle(), encoding="utf-8")
    page = tmp_path / "chart.html"
    page.write_text(f'<html><body><div class="vis" id="c"></div><script src="vega.js"></script><script>'
                    f'vegaEmbed("#c", {json.dumps(spec)}, {{renderer: "svg", actions: false}});</script></body></html>')
    tab.goto(page.as_uri())
    tab.wait_for("document.querySelectorAll('#c svg .role-axis-label text').length > 0")


def test_every_bar_of_the_exceptional_games_chart_has_its_label(tmp_path: Path, tab: Page) -> None:
    """It drew 11 bars with 5 labels (the demo's 11 cells of one rule each): at 9 pixels a bar, Vega hid the labels
    that would overlap."""
    from mafiabench.dashboards import charts

    rows = [{"study": "demo", "cell": f"deceive|fake/m{i:02d}|scripted/naive", "rule": "upset", "games": 11 - i,
             "cell_games": 11 - i, "flags": 11 - i, "max_surprise": 2.0, "link": "transcripts/index.html"}
            for i in range(11)]
    draw(charts.exceptional_chart(rows, studies=["demo"]), tmp_path, tab)
    labels = tab.eval(HIDDEN_Y_LABELS)
    assert len(labels) == 11, labels
    assert [name for name, hidden in labels if hidden] == [], labels


WIN_RATE_ROWS = """(() => { const table = Array.from(document.querySelectorAll('table')).find(t =>
    Array.from(t.querySelectorAll('th')).some(th => th.textContent.trim() === 'grouping'));
  return table ? Array.from(table.querySelectorAll('tbody tr')).map(r =>
    Array.from(r.children).slice(0, 4).map(c => c.textContent.trim())) : []; })()"""


def test_the_win_rates_table_shows_no_grouping_that_repeats_the_overall_row(site: Path, tab: Page) -> None:
    """With one study the table listed the same row five times (all, experiment, study, prompt_version, source):
    a grouping with one value in a variant is left out, and the page says which."""
    tab.goto((site / "win-rates.html").as_uri())
    rows = tab.eval(WIN_RATE_ROWS)
    assert rows, "the table has no rows"
    values: dict[tuple[str, str], set[str]] = {}
    for variant, grouping, value, _team in rows:
        values.setdefault((variant, grouping), set()).add(value)
    single = {key for key, seen in values.items() if key[1] != "all" and len(seen) == 1}
    assert not single, f"groupings with one value repeat the overall row: {sorted(single)}"
    note = tab.eval("(document.querySelector('p.same-as-overall') || {}).textContent || ''")
    assert "equal the overall row" in note, note

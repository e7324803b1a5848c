"""Page defects a newcomer met (issue 40 item 5), each read in a real browser (headless Debian chromium, as
test_browser.py drives it) on the dashboards of test_dashboards' small study."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from test_browser import CHROMIUM, Page, chromium

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from test_dashboards import shared_site

    return shared_site(tmp_path_factory)[1]


@pytest.fixture(scope="module")
def tab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    with chromium(tmp_path_factory.mktemp("chromium")) as page:
        yield page


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

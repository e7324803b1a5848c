"""Static dashboards: every page is written from the marts, every link resolves to a file, nothing is loaded from
the network, model text is escaped, images export, large warehouses get a bounded set of transcripts, and a failed
quality gate leaves the previous dashboards untouched."""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import duckdb
import pytest

from mafiabench import publish as transform
from mafiabench.cli import main
from mafiabench.dashboards import PublishBlockedError, render_dashboards, transcript_path
from mafiabench.dashboards.html import environment, script_json
from mafiabench.dashboards.pages import PAGES
from mafiabench.quality import gate as quality
from mafiabench.warehouse import raw as warehouse
from support.dashboards import ROLE, SCRIPT, shared_site, snapshot, study_records


class Links(HTMLParser):
    """Every href/src of a page, and the text of each link."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []  # (tag, attribute, value)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.refs.append((tag, name, value))


def refs(page: Path) -> list[tuple[str, str, str]]:
    parser = Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.refs


def broken_links(site: Path) -> list[str]:
    """Links that leave the folder, point to the network or to a missing file."""
    bad = []
    for page in site.rglob("*.html"):
        for tag, attr, value in refs(page):
            if value.startswith("#"):
                continue
            if re.match(r"^[a-z][a-z0-9+.-]*:", value) or value.startswith("//"):
                bad.append(f"{page.relative_to(site)}: remote {tag}[{attr}]={value}")
                continue
            target = (page.parent / value.split("#")[0]).resolve()
            if not target.is_file() or site.resolve() not in target.parents:
                bad.append(f"{page.relative_to(site)}: missing {value}")
    return bad


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_site(tmp_path_factory)[0]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dashboards as the command line writes them, with images."""
    return shared_site(tmp_path_factory)[1]


def test_every_page_is_written_and_linked_from_the_index(site: Path) -> None:
    for spec in PAGES:
        assert (site / spec.path).is_file(), spec.path
    index_links = {v for _, _, v in refs(site / "index.html")}
    for spec in PAGES[1:]:
        assert spec.path in index_links, f"index does not link {spec.path}"
    assert (site / "assets" / "vega-bundle.js").stat().st_size > 500_000


def test_links_resolve_and_nothing_comes_from_the_network(site: Path) -> None:
    assert broken_links(site) == []
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "cdn.jsdelivr" not in text and "<script src=\"http" not in text


def test_exceptional_games_link_to_their_transcripts(site: Path) -> None:
    links = [v for _, attr, v in refs(site / "exceptional-games.html") if v.startswith("transcripts/")
             and v != "transcripts/index.html"]
    assert links, "no exceptional game linked"
    for value in links:
        page = site / value
        game_id = Path(value).stem
        assert f"Game {game_id}" in page.read_text(encoding="utf-8")


def test_model_text_is_escaped_everywhere(site: Path) -> None:
    hits = [p for p in (site / "transcripts").glob("*.html") if "alert(1)" in p.read_text(encoding="utf-8")]
    assert len(hits) == 1
    text = hits[0].read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt; I am innocent &amp; so is &lt;/script&gt; Bob" in text
    for page in site.rglob("*.html"):
        assert SCRIPT not in page.read_text(encoding="utf-8"), page


def test_the_scores_page_shows_the_study_protocol_card(site: Path, study: Path) -> None:
    """The card landed with the study, read from mart_protocol_cards: every aspect, the deviation first, its source."""
    con = duckdb.connect(str(study), read_only=True)
    try:
        statuses = dict(con.execute(
            "select status, count(*) from mart_protocol_cards where study = 'dash' group by 1").fetchall())
        (deviations,) = con.execute("select distinct deviations from mart_protocol_cards").fetchone()  # type: ignore[misc]
    finally:
        con.close()
    assert statuses["deviates"] == deviations == 2 and statuses["matches"] >= 40 and statuses["noted"] >= 3
    page = (site / "capability-scores.html").read_text(encoding="utf-8")
    assert "Protocol card: dash against Mini-Mafia benchmark v4.1" in page
    assert page.index("Prompt wrapper") < page.index("Messages cut at the limit by the engine")  # deviations first
    assert "src/config.py STANDARD_TOKEN_LIMITS" in page and "2 deviation(s)" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; a note" in page


def test_transcripts_show_seats_votes_fallbacks_and_outcome(site: Path, study: Path) -> None:
    con = duckdb.connect(str(study), read_only=True)
    try:
        gid = con.execute(
            "select game_id from stg_events where event_type = 'vote' and random_fallback order by game_id limit 1"
        ).fetchall()[0][0]
        players = con.execute("select name, model from fct_player_games where game_id = ?", [gid]).fetchall()
    finally:
        con.close()
    text = (site / transcript_path(gid)).read_text(encoding="utf-8")
    assert "random fallback" in text and "votes for" in text and "Game over:" in text
    assert "Night 1" in text and "Day 1" in text
    for name, model in players:
        assert name in text and model in text


def test_each_chart_is_exported_as_png_and_svg_and_linked(site: Path) -> None:
    n_charts = 0
    for page in site.glob("*.html"):
        text = page.read_text(encoding="utf-8")
        charts = re.findall(r'id="chart-([^"]+)"', text)
        n_charts += len(charts)
        for key in charts:
            for fmt in ("png", "svg"):
                name = f"{page.stem}.{key}.{fmt}"
                assert f'href="{name}"' in text, f"{page.name} does not link {name}"
        for key in charts:
            assert (site / f"{page.stem}.{key}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert "<svg" in (site / f"{page.stem}.{key}.svg").read_text(encoding="utf-8")[:500]
    assert n_charts >= 12


def test_chart_json_cannot_close_its_script_element() -> None:
    text = script_json({"reason": "</script><script>alert(1)</script> <!-- \u2028"})
    assert "</" not in text and "<!--" not in text and "\u2028" not in text
    assert json.loads(text) == {"reason": "</script><script>alert(1)</script> <!-- \u2028"}
    cell = environment().from_string(
        '{% import "macros.html.j2" as m %}{% call(r) m.table(rows, ["model"]) %}<td>{{ r.m }}</td>{% endcall %}'
    ).render(rows=[{"m": "<b>x</b>"}])
    assert "&lt;b&gt;x&lt;/b&gt;" in cell and "<b>x" not in cell


def test_unsafe_game_ids_get_distinct_safe_pages() -> None:
    assert transcript_path("exp.cell-1.00003") == "transcripts/exp.cell-1.00003.html"
    assert transcript_path("index") != "transcripts/index.html"
    a, b = transcript_path("../x/y z"), transcript_path("../x/y_z")
    assert a != b
    for p in (a, b):
        assert re.fullmatch(r"transcripts/[A-Za-z0-9._-]+\.html", p) and ".." not in p


def _copy(study: Path, tmp_path: Path) -> Path:
    target = tmp_path / "w.duckdb"  # the name of the shared study's: its parsed dbt project is read, not parsed again
    shutil.copy(study, target)
    return target


def test_failed_gate_leaves_the_previous_dashboards_untouched(
    study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _copy(study, tmp_path)
    out = tmp_path / "dashboards"
    out.mkdir()
    (out / "README.md").write_text("hand-written, kept across renders\n")
    con = warehouse.connect(db)
    try:
        render_dashboards(con, out)
        before = snapshot(out)
        assert "README.md" in before and "index.html" in before

        # A game landed after the build: the marts are stale, publishing is refused.
        extra = study_records(1, experiment="late")[0]
        warehouse.load_records(con, [extra])
        with pytest.raises(PublishBlockedError, match="stale"):
            render_dashboards(con, out)
        assert snapshot(out) == before

        # The next build fails an expectation: refused again, with the reason, and nothing changes.
        # (Only the injected result is returned: the real suites cost seconds and are tested elsewhere.)
        failing = quality.ExpectationResult("raw_games", "expect_something", "an injected failure", {}, False, 1, 1)
        monkeypatch.setattr(quality, "run_suites", lambda *a, **k: [failing])
        result = transform.build_warehouse(con, raise_on_failure=False)
        assert not result.published
        with pytest.raises(PublishBlockedError, match="quality gate"):
            render_dashboards(con, out)
    finally:
        con.close()
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dashboards", "w.duckdb"]


def test_the_command_refuses_with_one_clear_line(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dashboards", "--warehouse", str(tmp_path / "nope.duckdb"), "--out", str(tmp_path / "d")]) == 2
    assert "not found" in capsys.readouterr().err
    db = _copy(study, tmp_path)
    con = duckdb.connect(str(db))
    con.execute("update build_runs set status = 'failed', published = false, n_failed = 1")
    con.close()
    assert main(["dashboards", "--warehouse", str(db), "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert "quality gate" in err and "not published" in err
    assert not (tmp_path / "d").exists()


def test_large_warehouse_renders_linked_games_plus_a_sample(study: Path, tmp_path: Path) -> None:
    con = duckdb.connect(str(study), read_only=True)
    try:
        n_games = con.execute("select count(*) from fct_games").fetchall()[0][0]
        flagged = {r[0] for r in con.execute("select game_id from mart_exceptional_games").fetchall()}
        result = render_dashboards(con, tmp_path / "d", max_transcripts=10, transcript_sample=5)
    finally:
        con.close()
    pages = list((tmp_path / "d" / "transcripts").glob("*.html"))
    assert result.transcripts_sampled and result.games == n_games
    assert len(pages) - 1 == result.transcripts < n_games  # minus the list of transcripts
    rendered = {p.stem for p in pages}
    assert flagged <= rendered, "every game linked from the exceptional page has its transcript"
    assert broken_links(tmp_path / "d") == []
    assert f"of {n_games:,} games have a transcript" in (tmp_path / "d" / "transcripts" / "index.html").read_text()


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_capability_pages_carry_each_cell_and_the_exact_baselines(site: Path, study: Path) -> None:
    for cap in ROLE:
        text = (site / f"capability-{cap}.html").read_text(encoding="utf-8")
        assert "day-informed" in text and "7/12" in text  # exact fraction of the informed-detective baseline
        for (target,) in _rows(study, f"select distinct target_model from mart_capability_win_rates "
                                      f"where capability = '{cap}'"):
            assert target in text
        assert '"datum.study == study"' in text or "datum.study == study" in text


def test_a_capability_cell_is_named_as_the_design_names_it(study: Path) -> None:
    """A capability bar's games were listed under `deceive|<background>|<target>` while their rows say
    `deceive|<target>|<background>` (issue 31 item 7): the marts form the name once (`capability_cell`), and it is
    the cell every designed game of the bar was played in (`homogeneous|<model>` for the one cell of all three)."""
    pairs = _rows(study, "select distinct c.capability_cell, g.cell from mart_capability_games as c "
                         "inner join fct_games as g using (game_id)")
    assert len(pairs) >= 19 and all(name == cell for name, cell in pairs), [p for p in pairs if p[0] != p[1]]
    bars = _rows(study, "select distinct capability_cell from mart_capability_win_rates")
    assert {name for (name,) in bars} == {name for name, _ in pairs}


def test_a_registered_page_is_rendered_navigated_and_escaped(
    study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adding a page is one module with `@register` (here registered in the test) and one template (the generic
    charts template): it is written, every page's navigation and the index link it, and its text is escaped."""
    from mafiabench.dashboards import charts
    from mafiabench.dashboards import page_registry as registry
    from mafiabench.dashboards.html import Page

    monkeypatch.setattr(registry, "_PAGES", dict(registry._PAGES))

    def details(ctx: registry.Context) -> list[Page]:
        return [Page("extra/one.html", "One", "charts.html.j2", {"lead": SCRIPT})]

    @registry.register("extra.html", "Extra", f"An added page {SCRIPT}", order=65, extra=details)
    def build(ctx: registry.Context) -> Page:
        rows = ctx.marts.rows("select study, 'town won' as outcome, count(*) as games from fct_games group by 1")
        page = Page("extra.html", "Extra page", "charts.html.j2", {"lead": f"Model text: {SCRIPT}"})
        page.add_chart("games", charts.outcomes_chart(rows), "Games per study.")
        return page

    con = duckdb.connect(str(study), read_only=True)
    try:
        result = render_dashboards(con, tmp_path / "d", max_transcripts=0, transcript_sample=0)
    finally:
        con.close()
    site = tmp_path / "d"
    assert "extra.html" in result.pages
    text = (site / "extra.html").read_text(encoding="utf-8")
    assert 'id="chart-games"' in text and f"Model text: {SCRIPT}" not in text
    assert "Model text: &lt;script&gt;alert(1)&lt;/script&gt;" in text
    for page in [site / "index.html", site / "costs.html", next((site / "transcripts").glob("dash*.html"))]:
        assert "extra.html" in {v.split("/")[-1] for _, _, v in refs(page)}, page
    assert f"An added page {SCRIPT}" not in (site / "index.html").read_text(encoding="utf-8")
    one = (site / "extra" / "one.html").read_text(encoding="utf-8")  # not in the navigation, same shell
    assert SCRIPT not in one and 'href="../extra.html"' in one and "extra/one.html" not in result.pages
    assert broken_links(site) == []

    with pytest.raises(ValueError, match=r"two pages registered at extra\.html"):
        registry.register("extra.html", "Extra", "A second module claims the same path.", order=66)(lambda ctx: None)


def test_an_empty_section_says_why() -> None:
    """Never a bare "no games" when games were landed: the status names how many and why they were not scored."""
    from mafiabench.dashboards.html import Page, data_status, render_page

    status = data_status(10340, 0, [("inconsistent memories", 10340)])
    assert status == "10,340 games, all invalid or unscored: inconsistent memories (10,340)."
    assert data_status(1200, 900, [("no votes cast", 250), ("unfinished", 50)]) == (
        "1,200 games, 300 of them not scored: no votes cast (250), unfinished (50).")
    assert data_status(0, 0, []) == "No game has been landed yet."
    page = Page("bias.html", "Biases", "bias.html.j2")
    page.data.update(last=[], name_seat=[], studies=[])
    html = render_page(page, nav=[], data_status=status)
    assert "No game had a discussion. <span class=\"why\">10,340 games, all invalid or unscored: inconsistent " \
           "memories (10,340).</span>" in html


@pytest.mark.parametrize("name", ["strategema.html", "detector.html"])
def test_a_page_without_its_games_says_why_once_and_shows_no_empty_section(site: Path, name: str) -> None:
    """On a warehouse without multi-night games (or detections) every section of the Strategema (or detector) page
    was empty, each repeating one sentence about the warehouse (issue 31 item 7). The shared study is Mini-Mafia
    only: the page says once, at the top, why it is empty and what the warehouse holds, and shows no section."""
    html = (site / name).read_text(encoding="utf-8")
    main = html[html.index("<main"):html.index("</main>")]
    assert main.count('class="empty') == 1, main
    assert re.search(r'<p class="empty why-empty">[^<]*\(76 games, all mini-mafia\)', main), main
    assert "all scored" not in main  # the warehouse status each empty section repeated
    assert "<h2" not in main and "<h3" not in main and "<table" not in main and 'class="vis"' not in main


def test_win_rates_chart_keeps_the_group_name_and_the_bar_length_apart() -> None:
    """The win-rates chart once wrote each bar's length into `value`, the field that also holds the group name
    (a cell): the y axis mixed numbers with cell names, bars ran past 100% and the PNG came out 14,570 px wide."""
    import io

    import vl_convert
    from PIL import Image

    from mafiabench.dashboards.charts import win_rate_chart

    rows = [{"variant": "mini-mafia", "dimension": "cell", "value": f"deceive|model-{i}|background", "team": "mafia",
             "n": 40, "k": 10 + i, "k_tie": 3, "laplace_mean": (11 + i) / 42, "beta_sd": 0.07,
             "wilson_low": 0.1, "wilson_high": 0.6} for i in range(12)]
    spec = win_rate_chart(rows, dimensions=["cell"], variants=["mini-mafia"])
    data = next(iter(spec["datasets"].values()))
    bars = [d for d in data if d["kind"] == "bar"]
    assert {d["value"] for d in bars} == {r["value"] for r in rows}  # the group name survives
    for group in {d["value"] for d in bars}:
        total = sum(d["share"] for d in bars if d["value"] == group)
        assert 0 <= total <= 1  # clean + tie-decided parts stay within the rate
    layer = spec["layer"][0]
    assert layer["encoding"]["y"]["field"] == "value" and layer["encoding"]["x"]["field"] == "share"
    png = vl_convert.vegalite_to_png(spec, scale=1)
    width, height = Image.open(io.BytesIO(png)).size
    assert width < 1400, width
    assert 12 * 20 <= height < 1200, height

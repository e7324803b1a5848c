"""Pages to HTML: the jinja2 environment (autoescaping on for every template), the filters the templates format
numbers with, the `Page`/`ChartBlock` a page module returns, and `render_page`.

Escaping is the template engine's job, not the page author's: every `{{ value }}` is HTML-escaped (quotes too)
unless it is a `Markup` value, and nothing in this package marks model text as `Markup`. The only `Markup` built
here is chart JSON (`script_json`, safe inside `<script>`: `<`, `>` and `&` are escaped as JSON, so a
`</script>` in the data cannot end the element) and the stylesheet. Templates live in `templates/` (package data);
`base.html.j2` holds the page shell (navigation, stylesheet, the local Vega scripts), `macros.html.j2` the shared
pieces (tables, badges, game links, figures).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote, urlencode

import jinja2
from markupsafe import Markup

ASSETS = "assets"
VEGA_BUNDLE = "vega-bundle.js"
STYLESHEET = "style.css"
TEMPLATES = "templates"


def href(path: str) -> str:
    """A relative link to a file we wrote: percent-encoded (file names are safe already; this is belt and braces)."""
    return quote(path, safe="/#.-_~%=&")  # `%`, `=`, `&`: a games-list filter (`games_url`) is encoded already


GAMES_INDEX = "transcripts/index.html"


def study_slug(study: str, taken: set[str]) -> str:
    """A file- and anchor-safe name for a study (its sections, anchors and CSV exports on a page), distinct from the
    names already `taken` on that page (and added to them)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", study).strip("-.") or "study"
    name, i = base, 2
    while name in taken:
        name, i = f"{base}-{i}", i + 1
    taken.add(name)
    return name


def games_url(filters: dict[str, Any] | None = None, **more: Any) -> str:
    """The games list filtered to the games behind a figure (relative to the dashboards root): the index reads the
    filters from the address hash (`study`, `cell`, `model`, `outcome`, `flag`, `bar`, or a role's model)."""
    items = {k: v for k, v in {**(filters or {}), **more}.items() if v not in (None, "")}
    return GAMES_INDEX + ("#" + urlencode(items, quote_via=quote) if items else "")


def script_json(obj: Any) -> Markup:
    """JSON that is safe inside a `<script>` element (no `</script>`, no `<!--`, no line separators)."""
    text = json.dumps(obj, ensure_ascii=False, default=str, separators=(",", ":"))
    return Markup(
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


# -- number formats (template filters) -------------------------------------------------------------------------


def _missing(x: Any) -> bool:
    return x is None or isinstance(x, jinja2.Undefined) or (isinstance(x, float) and math.isnan(x))


def fmt_int(x: Any) -> str:
    return "–" if _missing(x) else f"{int(x):,}"


def fmt_float(x: Any, digits: int = 3) -> str:
    return "–" if _missing(x) else f"{float(x):.{digits}f}"


def fmt_pct(x: Any, digits: int = 1) -> str:
    return "–" if _missing(x) else f"{100 * float(x):.{digits}f}%"


def fmt_usd(x: Any) -> str:
    if _missing(x):
        return "–"
    x = float(x)
    return f"${x:,.4f}" if abs(x) < 1 else f"${x:,.2f}"


def fmt_spread(x: Any, digits: int | None = None, *, pct: bool = True) -> str:
    """An uncertainty (a standard deviation or error), as `pct` (or `fixed`) prints it, but never rounded to zero
    when it is not: at a million games a win rate's sd of 0.05% would print "± 0.0%", a figure known exactly. Below
    the format's last digit it keeps two significant digits (0.050%)."""
    if _missing(x):
        return "–"
    digits = (1 if pct else 3) if digits is None else digits
    value = 100 * float(x) if pct else float(x)
    if value != 0 and round(value, digits) == 0 and math.isfinite(value):
        digits = 1 - math.floor(math.log10(abs(value)))
    return f"{value:.{digits}f}{'%' if pct else ''}"


def _apart(lo: Any, hi: Any, pct: bool, digits: int) -> tuple[str, str]:
    """Two bounds with as many more digits as it takes for bounds that differ to print apart (at a million games
    a Wilson interval 0.1 points wide would print [54.6%, 54.6%], a rate known exactly)."""
    f = fmt_pct if pct else fmt_float
    while f(lo, digits) == f(hi, digits) and float(lo) != float(hi) and digits < 8:
        digits += 1
    return f(lo, digits), f(hi, digits)


def fmt_interval(lo: Any, hi: Any, pct: bool = True) -> str:
    """[lo, hi], as `pct` (or `fixed`) prints each, bounds that differ printed apart (`_apart`)."""
    if _missing(lo) or _missing(hi):
        return "–"
    low, high = _apart(lo, hi, pct, 1 if pct else 3)
    return f"[{low}, {high}]"


def fmt_range(lo: Any, hi: Any, digits: int = 2) -> str:
    """An interval on the logit scale as the leaderboard prints it, "lo to hi", bounds that differ printed apart
    (`_apart`)."""
    if _missing(lo) or _missing(hi):
        return "–"
    low, high = _apart(lo, hi, False, digits)
    return f"{low} to {high}"


def show(value: Any) -> Any:
    """A table cell's plain value: missing → "–", booleans → yes/no, floats to 4 significant digits, lists joined."""
    if isinstance(value, Markup):
        return value
    if _missing(value):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return value


class Header(NamedTuple):
    """A table header: numeric columns are right-aligned; `title` is the hover text."""

    label: str
    numeric: bool = False
    title: str | None = None


def num(label: str, title: str | None = None) -> Header:
    """The header of a numeric column (templates: `num("games")`)."""
    return Header(label, True, title)


def rate_headers(label: str = "wins", k_tie: bool = True) -> list[Header]:
    """Headers matching the `rate_cells` macro: k / n, the tie-break part, Beta mean ± sd, Wilson interval."""
    out = [num(label)]
    if k_tie:
        out.append(num("after a tie-break"))
    out += [
        num("Beta mean ± sd", "Laplace/Beta posterior mean (k+1)/(n+2) and sd of Beta(k+1, n-k+1)"),
        num("Wilson 95%"),
    ]
    return out


# -- pages -----------------------------------------------------------------------------------------------------


@dataclass
class ChartBlock:
    """One chart of a page: its Vega-Lite spec, a caption, and (after export) the image files beside the page."""

    key: str
    spec: dict[str, Any]
    caption: str = ""
    images: dict[str, str] = field(default_factory=dict)  # format -> file name, relative to the page

    @property
    def element_id(self) -> str:
        return f"chart-{self.key}"


@dataclass
class Page:
    """A page to write: its path relative to the dashboards root, its title, the template that lays it out and the
    values that template reads, and its charts (placed in the template with `{{ figure("key") }}`)."""

    path: str
    title: str
    template: str
    data: dict[str, Any] = field(default_factory=dict)
    charts: list[ChartBlock] = field(default_factory=list)
    exports: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def root(self) -> str:
        """The relative path from this page back to the dashboards root."""
        return "../" * self.path.count("/")

    def add_chart(self, key: str, spec: dict[str, Any], caption: str = "") -> None:
        self.charts.append(ChartBlock(key, spec, caption))

    def add_export(self, key: str, rows: Sequence[Mapping[str, Any]]) -> str:
        """A table the page offers as CSV, written beside it as `<page>.<key>.csv`; returns that file's name (link
        it with `{{ m.csv_link("<key>") }}`). The rows are written as given: export what the table shows."""
        self.exports[key] = [dict(r) for r in rows]
        return self.export_name(key)

    def export_name(self, key: str) -> str:
        return f"{Path(self.path).stem}.{key}.csv"


EMBED_OPTIONS = {
    # Specs are compiled to Vega here (vl-convert), not in the browser: pages draw faster and Vega-Lite's compile
    # warnings (it warns about every faceted chart with independent scales) stay out of the console.
    "mode": "vega",
    "renderer": "svg",  # text stays text in the DOM (searchable, testable); PNG export still works from the menu
    "actions": {"export": True, "source": False, "compiled": False, "editor": False},  # no editor link: offline
}


def compile_vega(spec: dict[str, Any]) -> dict[str, Any]:
    """Vega-Lite → Vega with the Vega-Lite version vl-convert bundles (the one the pages load)."""
    import vl_convert

    return dict(vl_convert.vegalite_to_vega(spec))


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The one template environment: package templates, autoescape on for every template, undefined names fail."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("mafiabench.dashboards", TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=lambda value: "" if value is None else value,  # a missing value prints as nothing, not "None"
    )
    env.filters.update(
        thousands=fmt_int,
        fixed=fmt_float,
        pct=fmt_pct,
        spread=fmt_spread,
        usd=fmt_usd,
        show=show,
        href=href,
        script_json=script_json,
    )
    env.globals.update(
        num=num,
        rate_headers=rate_headers,
        games_url=games_url,
        interval=fmt_interval,
        logit_range=fmt_range,
        ASSETS=ASSETS,
        VEGA_BUNDLE=VEGA_BUNDLE,
        STYLESHEET=STYLESHEET,
    )
    return env


def stylesheet() -> str:
    return resources.files("mafiabench.dashboards").joinpath(TEMPLATES, STYLESHEET).read_text(encoding="utf-8")


def data_status(n_games: int, n_scored: int, reasons: Sequence[tuple[str, int]]) -> str:
    """What the data behind every empty section is: "10,340 games, all invalid: inconsistent memories
    (10,340)", or "1,200 games, 300 of them not scored: no votes cast (250), unfinished (50)"."""
    if n_games == 0:
        return "No game has been landed yet."
    why = ", ".join(f"{reason} ({fmt_int(n)})" for reason, n in reasons)
    if n_scored == 0:
        return f"{fmt_int(n_games)} games, all invalid or unscored: {why}."
    if n_scored < n_games:
        return f"{fmt_int(n_games)} games, {fmt_int(n_games - n_scored)} of them not scored: {why}."
    return f"{fmt_int(n_games)} games, all scored."


def render_page(
    page: Page,
    *,
    nav: Sequence[tuple[str, str]],
    footer: str = "",
    transcripts: Mapping[str, str] | None = None,
    data_status: str = "",
) -> str:
    """The page's template rendered inside the base template. `transcripts` (game id → page path) lets
    `game_link` link a game whose transcript was rendered; `footer` is plain text; `data_status` says what the
    warehouse holds (`data_status()`), and an empty table says it after its own message, so an empty section
    never reads as "no games" when games were landed but could not be scored."""
    charts = {b.key: b for b in page.charts}
    compiled = [{"id": b.element_id, "spec": compile_vega(b.spec)} for b in page.charts]
    template = environment().get_template(page.template)
    html = template.render(
        page.data,
        page=page,
        root=page.root,
        nav=list(nav),
        footer=footer,
        transcripts=transcripts or {},
        charts=charts,
        compiled_charts=compiled,
        embed_options=EMBED_OPTIONS,
        data_status=data_status,
    )
    unplaced = [b.key for b in page.charts if f'id="{b.element_id}"' not in html]
    if unplaced:
        raise RuntimeError(f"{page.template} does not place the charts {unplaced} of {page.path} (figure(key))")
    return html


__all__ = [
    "ASSETS",
    "STYLESHEET",
    "VEGA_BUNDLE",
    "ChartBlock",
    "Header",
    "Markup",
    "Page",
    "environment",
    "fmt_float",
    "fmt_int",
    "fmt_interval",
    "fmt_pct",
    "fmt_range",
    "fmt_spread",
    "fmt_usd",
    "href",
    "num",
    "rate_headers",
    "render_page",
    "script_json",
    "show",
    "stylesheet",
]

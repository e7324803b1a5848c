"""HTML building blocks: escaping, tables, chart embedding and the page shell.

Everything that reaches a page goes through `esc()` unless it is a `Markup` built here from escaped parts, so text
written by models (messages, names in imported data, failing rows of a validation) is always shown as text. Chart
specs are embedded as JSON inside a `<script>`; `script_json` escapes `<`, `>` and `&` so a `</script>` in the data
cannot end the script element.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

ASSETS = "assets"
VEGA_BUNDLE = "vega-bundle.js"
STYLESHEET = "style.css"


class Markup(str):
    """A string that is already safe HTML (built from escaped parts); `esc` passes it through."""

    __slots__ = ()


def esc(value: Any) -> Markup:
    """Text → HTML-escaped text (quotes too, so it is safe in attributes). None → empty."""
    if value is None:
        return Markup("")
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value), quote=True))


def href(path: str) -> str:
    """A relative link to a file we wrote: percent-encoded (file names are safe already; this is belt and braces)."""
    return quote(path, safe="/#.-_~")


def link(target: str, text: Any, *, cls: str | None = None) -> Markup:
    attr = f' class="{esc(cls)}"' if cls else ""
    return Markup(f'<a href="{esc(href(target))}"{attr}>{esc(text)}</a>')


def badge(text: str, kind: str = "info", title: str | None = None) -> Markup:
    tip = f' title="{esc(title)}"' if title else ""
    return Markup(f'<span class="badge badge-{esc(kind)}"{tip}>{esc(text)}</span>')


def script_json(obj: Any) -> str:
    """JSON that is safe inside a `<script>` element (no `</script>`, no `<!--`, no line separators)."""
    text = json.dumps(obj, ensure_ascii=False, default=str, separators=(",", ":"))
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


# -- number formats ---------------------------------------------------------------------------------------------


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


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


def fmt_interval(lo: Any, hi: Any, pct: bool = True) -> str:
    f = fmt_pct if pct else fmt_float
    return "–" if _missing(lo) or _missing(hi) else f"[{f(lo)}, {f(hi)}]"


# -- tables ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A table column: a row key (or a function of the row) and a header. Cells are escaped unless `Markup`."""

    header: str
    value: str | Callable[[Mapping[str, Any]], Any]
    numeric: bool = False
    title: str | None = None

    def cell(self, row: Mapping[str, Any]) -> Any:
        return self.value(row) if callable(self.value) else row.get(self.value)


def table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[Column],
    *,
    cls: str = "",
    empty: str = "No rows.",
    row_class: Callable[[Mapping[str, Any]], str | None] | None = None,
    header: bool = True,
) -> Markup:
    if not rows:
        return Markup(f'<p class="empty">{esc(empty)}</p>')
    head = "".join(
        f"<th{' class=num' if c.numeric else ''}{f' title={chr(34)}{esc(c.title)}{chr(34)}' if c.title else ''}>"
        f"{esc(c.header)}</th>"
        for c in columns
    )
    body: list[str] = []
    for row in rows:
        rc = row_class(row) if row_class else None
        cells = "".join(f"<td{' class=num' if c.numeric else ''}>{esc(_show(c.cell(row)))}</td>" for c in columns)
        body.append(f"<tr{f' class={chr(34)}{esc(rc)}{chr(34)}' if rc else ''}>{cells}</tr>")
    return Markup(
        f'<div class="table-wrap"><table class="{esc(cls)}">'
        + (f"<thead><tr>{head}</tr></thead>" if header else "")
        + f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _show(value: Any) -> Any:
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


def stats(items: Sequence[tuple[str, Any]]) -> Markup:
    """The "study in numbers" tiles: label → value (escaped)."""
    tiles = "".join(
        f'<div class="tile"><div class="tile-value">{esc(v)}</div><div class="tile-label">{esc(k)}</div></div>'
        for k, v in items
    )
    return Markup(f'<div class="tiles">{tiles}</div>')


# -- charts and pages -------------------------------------------------------------------------------------------


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
    """A page to write: its path relative to the dashboards root, title, body (Markup with chart placeholders)."""

    path: str
    title: str
    body: Markup
    charts: list[ChartBlock] = field(default_factory=list)

    @property
    def root(self) -> str:
        """The relative path from this page back to the dashboards root."""
        depth = self.path.count("/")
        return "../" * depth

    def chart(self, key: str) -> Markup:
        """The placeholder for a chart; `render_page` replaces it with the figure (images known only then)."""
        return Markup(f"<!--chart:{key}-->")


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


def figure(block: ChartBlock) -> Markup:
    downloads = " · ".join(link(name, fmt.upper()) for fmt, name in sorted(block.images.items()))
    export = f'<span class="downloads">Download: {downloads}</span>' if downloads else ""
    caption = f"<figcaption>{esc(block.caption)} {export}</figcaption>" if block.caption or export else ""
    return Markup(
        f'<figure class="chart"><div class="vis" id="{esc(block.element_id)}" role="img" '
        f'aria-label="{esc(block.caption or block.key)}"></div>{caption}</figure>'
    )


def render_page(page: Page, *, nav: Sequence[tuple[str, str]], footer: Markup) -> str:
    root = page.root
    body = str(page.body)
    for block in page.charts:
        body = body.replace(f"<!--chart:{block.key}-->", str(figure(block)))
    nav_html = "".join(
        f'<a href="{esc(href(root + path))}"{" class=current" if path == page.path else ""}>{esc(label)}</a>'
        for path, label in nav
    )
    scripts = ""
    if page.charts:
        charts = [{"id": b.element_id, "spec": compile_vega(b.spec)} for b in page.charts]
        scripts = (
            f'<script src="{esc(href(root + ASSETS + "/" + VEGA_BUNDLE))}"></script>\n'
            "<script>\n(function () {\n"
            f"  var charts = {script_json(charts)};\n"
            f"  var options = {script_json(EMBED_OPTIONS)};\n"
            "  charts.forEach(function (c) {\n"
            "    vegaEmbed('#' + c.id, c.spec, options).catch(function (err) {\n"
            "      console.error(err);\n"
            "      document.getElementById(c.id).textContent = 'This chart could not be drawn: ' + err;\n"
            "    });\n"
            "  });\n"
            "})();\n</script>"
        )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(page.title)} · mafiabench</title>
<link rel="stylesheet" href="{esc(href(root + ASSETS + "/" + STYLESHEET))}">
</head>
<body>
<header><a class="brand" href="{esc(href(root + "index.html"))}">mafiabench</a><nav>{nav_html}</nav></header>
<main>
<h1>{esc(page.title)}</h1>
{body}
</main>
<footer>{footer}</footer>
<noscript><p class="warn">Charts need JavaScript (bundled locally, no network needed); tables work without it.
</p></noscript>
{scripts}
</body>
</html>
"""


STYLE = """
:root { --fg: #1d2330; --muted: #5b6472; --line: #d9dee7; --bg: #ffffff; --soft: #f4f6fa; --accent: #3b6fb6; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); }
header { display: flex; flex-wrap: wrap; align-items: baseline; gap: .3rem 1rem; padding: .6rem 1.5rem;
         background: #1f2a3c; }
header a { color: #dbe4f3; text-decoration: none; font-size: 14px; }
header a.current { color: #fff; font-weight: 600; border-bottom: 2px solid #8fb3ea; }
header a.brand { color: #fff; font-weight: 700; font-size: 16px; margin-right: .5rem; }
header nav { display: flex; flex-wrap: wrap; gap: .2rem 1rem; }
main { padding: 1rem 1.5rem 2rem; max-width: 1400px; }
h1 { font-size: 1.6rem; margin: .4rem 0 .8rem; }
h2 { font-size: 1.25rem; margin: 1.8rem 0 .5rem; border-bottom: 1px solid var(--line); padding-bottom: .2rem; }
h3 { font-size: 1.05rem; margin: 1.2rem 0 .4rem; }
p.lead { color: var(--muted); max-width: 70rem; }
p.note, .muted { color: var(--muted); }
p.warn, .warn { background: #fff4e0; border-left: 4px solid #e69b00; padding: .5rem .8rem; }
p.empty { color: var(--muted); font-style: italic; }
a { color: var(--accent); }
footer { color: var(--muted); font-size: 13px; padding: 1rem 1.5rem; border-top: 1px solid var(--line); }
.table-wrap { overflow-x: auto; margin: .5rem 0 1rem; }
table { border-collapse: collapse; font-size: 13.5px; }
th, td { border-bottom: 1px solid var(--line); padding: .3rem .6rem; text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; position: sticky; top: 0; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.facts td:first-child { color: var(--muted); white-space: nowrap; }
tr.failed td { background: #fdecec; }
tr.passed td { background: #f3faf3; }
.tiles { display: flex; flex-wrap: wrap; gap: .8rem; margin: .5rem 0 1rem; }
.tile { background: var(--soft); border: 1px solid var(--line); border-radius: 6px; padding: .6rem 1rem;
        min-width: 9rem; }
.tile-value { font-size: 1.35rem; font-weight: 700; }
.tile-label { color: var(--muted); font-size: 13px; }
figure.chart { margin: .8rem 0 1.4rem; }
figure.chart figcaption { color: var(--muted); font-size: 13px; max-width: 70rem; }
.downloads { margin-left: .5rem; white-space: nowrap; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(18rem, 1fr)); gap: .8rem; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: .7rem 1rem; }
.card h3 { margin: 0 0 .3rem; }
.badge { display: inline-block; font-size: 11.5px; line-height: 1.4; padding: 0 .45rem; border-radius: 9px;
         margin-left: .3rem; white-space: nowrap; vertical-align: 1px; }
.badge-info { background: #e3ecf8; color: #23487a; }
.badge-warn { background: #fff0cc; color: #7a5200; }
.badge-bad { background: #fbdada; color: #8a1c1c; }
.badge-good { background: #dcf2dc; color: #1e5e1e; }
.badge-private { background: #ece3f7; color: #4f2a7a; }
.log { list-style: none; padding: 0; margin: 0; max-width: 60rem; }
.log li { padding: .25rem .6rem; border-left: 3px solid transparent; }
.log li.phase { margin-top: 1rem; font-weight: 700; border-bottom: 1px solid var(--line); }
.log li.message { border-left-color: #8fb3ea; }
.log li.silence { color: var(--muted); font-style: italic; }
.log li.vote { font-size: 14px; }
.log li.private { background: #faf7fd; }
.log li.elimination, .log li.death { font-weight: 600; }
.log li.end { margin-top: .8rem; font-weight: 700; background: var(--soft); }
.speaker { font-weight: 600; }
table.exceptional .game { white-space: nowrap; }
.says { white-space: pre-wrap; overflow-wrap: anywhere; }
pre.json { white-space: pre-wrap; overflow-wrap: anywhere; font-size: 12px; background: var(--soft);
           padding: .4rem; margin: 0; max-width: 50rem; }
"""


__all__ = [
    "ASSETS",
    "STYLE",
    "STYLESHEET",
    "VEGA_BUNDLE",
    "ChartBlock",
    "Column",
    "Markup",
    "Page",
    "badge",
    "esc",
    "fmt_float",
    "fmt_int",
    "fmt_interval",
    "fmt_pct",
    "fmt_usd",
    "href",
    "link",
    "render_page",
    "script_json",
    "stats",
    "table",
]

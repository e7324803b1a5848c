"""Static dashboards a researcher browses offline: pages generated from the marts, one transcript page per (linked or
sampled) game, Vega scripts bundled locally, publishing gated on the data-quality check.

Owns: `render.py` (the gate, the atomic swap, which transcripts to render), `pages/` (one module per page: its
queries and which charts it shows), `templates/` (jinja2, autoescaped; `base.html.j2` is the shell of every page,
`macros.html.j2` the shared tables, badges, links and figures), `charts.py` (Altair chart builders), `html.py` (the
template environment, number filters, `Page`), `data.py` (read-only access to the warehouse), `page_registry.py`.
May import: the warehouse through a DuckDB connection only (`data.Marts`); `mafiabench.warehouse.builds` for the
gate status; `mafiabench.errors`. Never the engine, the agents, the backends or `mafiabench.transform.models.baselines`:
the baselines are read from the `mart_baselines` table like every other number.

Adding a page (e.g. `strategema.html`):
1. `pages/strategema.py`: query the marts, add charts, return a `Page`, registered for the navigation and the index:

       @register("strategema.html", "Strategema", "One line for the index card.", order=65)
       def build(ctx: Context) -> Page:
           page = Page("strategema.html", "Strategema tables", "strategema.html.j2",
                       {"available": ctx.marts.has("mart_strategema")})
           if page.data["available"]:
               rows = ctx.marts.rows("select * from mart_strategema order by model")
               page.add_chart("scores", charts.some_chart(rows), "A caption.")
               page.data["rows"] = rows
           return page

   `order` places it in the navigation (index 0, transcripts 100; see `PAGES`). Pass `links=` a function
   `(marts, max_rows) -> [game_id, ...]` if the page links games, so their transcripts are always rendered, and
   `extra=` a function `(ctx) -> pages` for pages it links that are not in the navigation (one per item, say).
2. `templates/strategema.html.j2`: `{% extends "base.html.j2" %}` and fill `{% block body %}`; the shared macros
   are `m.*` (`m.table`, `m.figure("scores")`, `m.game_link(id)`, `m.missing("mart_strategema")`, `m.badge`),
   the number filters `thousands`, `fixed`, `pct`, `spread` (an sd or error after ±), `usd`, `show`. Every
   `{{ value }}` is escaped: never mark model text `|safe`. A chart added but not placed with `m.figure` fails the
   render.
Nothing else changes: `pages/__init__.py` imports every module of its folder. `tests/test_dashboards.py` checks
that every registered page is written and linked; `tests/test_browser.py` opens each one in chromium.
"""

from mafiabench.dashboards.pages.transcripts import transcript_path
from mafiabench.dashboards.render import PublishBlockedError, RenderResult, render_dashboards

__all__ = ["PublishBlockedError", "RenderResult", "render_dashboards", "transcript_path"]

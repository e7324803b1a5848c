"""Exceptional games: the games to read first, ranked by surprise, each linked to its transcript
(`mart_exceptional_games`)."""

from __future__ import annotations

from typing import Any

from mafiabench.dashboards import charts
from mafiabench.dashboards.data import Marts, cell_mark, inferred_cells, marked, studies_by_size
from mafiabench.dashboards.html import Page, games_url
from mafiabench.dashboards.page_registry import Context, register

RULE_TEXT = {
    "upset": "the outcome's probability under its cell's rate (this game left out) is at most the threshold",
    "detective_revealed_town_lost": "the detective named the mafioso in public and the town still lost",
    "unanimous_wrong_vote": "every vote went to a town player",
    "fallback_decided": "a random fallback vote (after a format failure) decided the game",
    "vote_reversal": "a player switched votes between consecutive days",
    "rare_level1_failure": "a Level-1 failure by a model that almost never fails it",
    "rare_level2_failure": "a Level-2 failure by a model that almost never fails it",
}
CHART_CELLS = 25  # per study: the cells with the most flagged games


def linked_games(m: Marts, limit: int) -> list[str]:
    """The games the page links (its top rows); their transcripts must be rendered."""
    if not m.has("mart_exceptional_games"):
        return []
    rows = m.rows("select game_id from mart_exceptional_games order by surprise desc, game_id, rule limit ?", [limit])
    return list(dict.fromkeys(r["game_id"] for r in rows))


def flagged_cells(m: Marts) -> tuple[list[dict[str, Any]], bool]:
    """Per (study, cell, rule): the games flagged, with the link to exactly them; only each study's CHART_CELLS cells
    with the most flagged games (and whether some cell was left out)."""
    rows = m.rows(
        """with counted as (
               select study, cell, rule, count(distinct game_id) as games, count(*) as flags,
                      max(surprise) as max_surprise
               from mart_exceptional_games group by study, cell, rule
           ),
           cells as (
               select study, cell, count(distinct game_id) as cell_games,
                      row_number() over (partition by study order by count(distinct game_id) desc, cell) as place
               from mart_exceptional_games group by study, cell
           )
           select c.*, k.cell_games, k.place from counted as c inner join cells as k using (study, cell)
           order by study, place, rule"""
    )
    for r in rows:
        r["link"] = games_url(study=r["study"], cell=r["cell"], rule=r["rule"])
    shown = [r for r in rows if r["place"] <= CHART_CELLS]
    return shown, len(shown) < len(rows)


@register(
    "exceptional-games.html",
    "Exceptional games",
    "Games to read first, ranked by surprise, with the reason.",
    order=40,
    links=linked_games,
)
def build(ctx: Context) -> Page:
    m = ctx.marts
    page = Page(
        "exceptional-games.html",
        "Exceptional games",
        "exceptional.html.j2",
        {"available": m.has("mart_exceptional_games")},
    )
    if not page.data["available"]:
        return page
    total = m.scalar("select count(*) from mart_exceptional_games") or 0
    rows = m.rows("select * from mart_exceptional_games order by surprise desc, game_id, rule limit ?", [ctx.max_rows])
    by_rule = m.rows(
        "select rule, count(*) as flags, count(distinct game_id) as games, max(surprise) as max_surprise "
        "from mart_exceptional_games group by rule order by flags desc"
    )
    for r in by_rule:
        r["meaning"] = RULE_TEXT.get(r["rule"], "")
    chart_rows, capped = flagged_cells(m)
    # A cell's label names its models: one whose games' background an importer inferred is marked where the page
    # names it, `(background inferred)` (the chart's label is data; its bars' links keep the cell itself).
    backgrounds = inferred_cells(m, by="study")
    for r in [*chart_rows, *rows]:
        r["cell_mark"] = cell_mark(backgrounds.get((r["study"], r["cell"])))
    chart_rows = [{**r, "cell": marked(r["cell"], r["cell_mark"])} for r in chart_rows]
    if chart_rows:
        studies = studies_by_size(m, "mart_exceptional_games")
        most = f"the {CHART_CELLS} cells with the most flagged games of each study" if capped else \
            "every cell with a flagged game"
        page.add_chart(
            "flagged",
            charts.exceptional_chart(chart_rows, studies=studies),
            f"Flagged games per cell and rule ({most}); click a bar for exactly those games.",
        )
    for i, r in enumerate(rows, start=1):
        r["rank"] = i
    page.data.update(total=total, rows=rows, by_rule=by_rule,
                     inferred_cells=any(r["cell_mark"] for r in [*chart_rows, *rows]))
    return page

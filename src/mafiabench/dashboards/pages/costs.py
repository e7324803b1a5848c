"""Cost and tokens per model, per cell and per game (`mart_cell_costs`, `mart_game_costs`)."""

from __future__ import annotations

from typing import Any

from mafiabench.dashboards import charts
from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import Page
from mafiabench.dashboards.page_registry import Context, register

TOP_GAMES = 20


def costly_games(m: Marts, limit: int = TOP_GAMES) -> list[str]:
    """The most expensive games, which the page links (their transcripts must be rendered)."""
    if not m.has("mart_game_costs"):
        return []
    rows = m.rows(
        "select game_id from mart_game_costs order by coalesce(cost_usd, 0) desc, total_tokens desc, game_id limit ?",
        [min(limit, TOP_GAMES)],
    )
    return [r["game_id"] for r in rows]


def histogram(m: Marts, table_name: str, column: str, bins: int = 30) -> list[dict[str, Any]]:
    """Equal-width bins computed in SQL, so a million games stay a few dozen points."""
    return m.rows(
        f"""with s as (select min({column}) as lo, max({column}) as hi from {table_name}),
                w as (select lo, greatest((hi - lo) / {bins}.0, 1.0) as width from s),
                b as (select least(floor(({column} - w.lo) / w.width), {bins - 1}) as i, w.lo, w.width
                      from {table_name}, w where {column} is not null)
            select lo + i * width as lo, lo + (i + 1) * width as hi, count(*) as games
            from b group by i, lo, width order by i"""
    )


@register(
    "costs.html",
    "Cost",
    "Tokens, money, calls and latency per model, per cell and per game.",
    order=70,
    links=lambda m, _max_rows: costly_games(m),
)
def build(ctx: Context) -> Page:
    m = ctx.marts
    page = Page(
        "costs.html", "Cost and tokens", "costs.html.j2", {"available": m.has("mart_cell_costs"), "money_note": None}
    )
    if not page.data["available"]:
        return page
    # Over no rows (scripted players only: no call) every total is 0, known exactly, not missing; over rows, a sum
    # is the mart's (null where every row's is: a count no provider reported stays unknown).
    totals = m.one(
        """select count(*) as cells, sum(n_calls) as calls, sum(n_failed_calls) as failed,
                  sum(n_retried_calls) as retried, sum(n_replaced_calls) as replaced,
                  sum(input_tokens) as input_tokens, sum(output_tokens) as output_tokens,
                  sum(cached_tokens) as cached_tokens, sum(cost_usd) as cost, bool_and(fully_priced) as priced,
                  string_agg(distinct price_version, ', ') as price_versions
           from mart_cell_costs"""
    )
    # The run summary's "retry attempts" and "format failures" (attempts beyond the first; answers that did not
    # parse), over the same calls: every attempt's, replaced ones included.
    totals.update(
        m.one("""select sum(n_attempts) - sum(n_calls) as retry_attempts, sum(n_format_failures) as format_failures
                 from mart_game_costs""")
        if m.has("mart_game_costs") else {"retry_attempts": None, "format_failures": None}
    )
    if not totals["cells"]:
        totals.update({k: 0 for k in ("calls", "failed", "retried", "replaced", "input_tokens", "output_tokens",
                                      "cached_tokens", "cost", "retry_attempts", "format_failures")})
    per_model = m.rows(
        """select provider || '/' || model as model, sum(n_games) as n_games, sum(n_calls) as n_calls,
                  sum(n_failed_calls) as n_failed_calls, sum(n_retried_calls) as n_retried_calls,
                  sum(input_tokens) as input_tokens, sum(output_tokens) as output_tokens,
                  sum(cached_tokens) as cached_tokens, sum(cost_usd) as cost_usd,
                  sum(cost_usd) / nullif(sum(n_games), 0) as cost_usd_per_game,
                  (sum(input_tokens) + sum(output_tokens)) / nullif(sum(n_games), 0) as tokens_per_game,
                  bool_and(fully_priced) as fully_priced
           from mart_cell_costs group by 1 order by 1"""
    )
    if per_model:
        page.add_chart("tokens", charts.model_tokens_chart(per_model), "Tokens per game by model.")
        if any((r.get("cost_usd") or 0) > 0 for r in per_model):
            page.add_chart("cost", charts.model_cost_chart(per_model), "Money per game by model.")
        elif all(r.get("fully_priced") for r in per_model):  # every bar would be 0: an empty frame
            page.data["money_note"] = ("No money chart: every model call is priced at US$ 0 (fake, scripted or local "
                                       "models, free by the price table), so every model's cost is US$ 0.")
        else:
            unpriced = ", ".join(str(r["model"]) for r in per_model if not r.get("fully_priced"))
            page.data["money_note"] = (f"No money chart: {unpriced} have no row in the price table (their cost is "
                                       "unknown, 0 here) and the others cost US$ 0.")
    cells = m.rows("select * from mart_cell_costs order by study, cell, provider, model limit ?", [ctx.max_rows])
    games = None
    if m.has("mart_game_costs"):
        hist = histogram(m, "mart_game_costs", "total_tokens")
        if hist:
            page.add_chart(
                "game-tokens",
                charts.histogram_chart(hist, x_title="tokens per game"),
                "Distribution of tokens per game (games with model calls).",
            )
        games = m.rows(
            "select * from mart_game_costs order by coalesce(cost_usd, 0) desc, total_tokens desc, game_id limit ?",
            [TOP_GAMES],
        )
    page.data.update(totals=totals, per_model=per_model, cells=cells, games=games)
    return page

"""The leaderboard: skill ratings across models, overall, as mafia, as town and by role, with the interval each fit
earns (robust when over-dispersed) and a rank only where the data rate the model; each fit's dispersion, design
rank, held-out log loss and Brier beside baselines and a calibration plot; a deceiver-against-detector scatter with
its figures in a table; a head-to-head matrix (one cell per game, Wilson intervals, random play) whose cells open
their games; self-play apart; cost and tokens per game.

Reads `mart_ratings`, `mart_rating_fit`, `mart_rating_calibration`, `mart_head_to_head`, `mart_self_play`,
`mart_rating_coverage` (transform/models/ratings.py says how they are fitted) and `mart_cell_costs`.
"""

from __future__ import annotations

from typing import Any

from mafiabench.dashboards import charts
from mafiabench.dashboards.data import Marts, inferred_label, inferred_mark, inferred_seats, mark_named
from mafiabench.dashboards.html import Page, games_url
from mafiabench.dashboards.page_registry import Context, register

PATH = "leaderboard.html"


def head_to_head_key(mafia_model: str, town_model: str) -> str:
    """The games-list filter of a matrix cell (the games list reads the same keys from `mart_head_to_head`)."""
    return f"h2h|{mafia_model}|{town_model}"


def _studies(m: Marts) -> list[str]:
    return [r["study"] for r in m.rows(
        "select study, sum(n_games) as n from mart_ratings where side = 'overall' group by study order by n desc, study"
    )]


SIDE_ORDER = "case side when 'overall' then 0 when 'mafia' then 1 when 'town' then 2 else 3 end"


def _scatter_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (study, model) with its rating as mafia and as town, where the data rate it on both sides."""
    by_model: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        if r["side"] not in ("mafia", "town"):
            continue
        entry = by_model.setdefault((r["study"], r["model"]), {"study": r["study"], "model": r["model"],
                                                               "model_mark": r.get("model_mark")})
        side = r["side"]
        entry.update({side: r["rating"], f"{side}_low": r["ci_low"], f"{side}_high": r["ci_high"],
                      f"{side}_games": r["n_games"], f"{side}_rated": r.get("rated", True)})
    return [e for e in by_model.values() if e.get("mafia_rated") and e.get("town_rated")]


def _labelled(rows: list[dict[str, Any]], inferred: dict[tuple[str, str], bool]) -> list[dict[str, Any]]:
    """A chart's rows with each model named as the page marks it (`X (inferred)`, `inferred_seats`): the chart's
    axis and tooltip show the name as data; the table's rows keep the model itself (their links filter by it)."""
    return [{**r, "model": inferred_label(r["model"], inferred.get((r["study"], r["model"])))} for r in rows]


def _matrix(m: Marts, study: str, inferred: dict[tuple[str, str], bool]) -> dict[str, Any]:
    pairs = m.rows("select * exclude (game_ids) from mart_head_to_head where study = ? order by mafia_model, "
                   "town_model", [study])
    mafia = sorted({p["mafia_model"] for p in pairs})
    town = sorted({p["town_model"] for p in pairs})
    cells = {(p["mafia_model"], p["town_model"]): p for p in pairs}
    for p in pairs:
        p["link"] = games_url(study=study, bar=head_to_head_key(p["mafia_model"], p["town_model"]))
    return {"study": study, "mafia": mafia, "town": town,
            # a model whose seats an importer inferred is marked in the row and column heads (`inferred_seats`)
            "marks": {model: inferred_mark(inferred.get((study, model))) for model in {*mafia, *town}},
            "rows": [[cells.get((a, b)) for b in town] for a in mafia], "n_pairs": len(pairs),
            "mirrored": sum(1 for p in pairs if p["mirrored"]), "games": sum(p["games"] for p in pairs),
            "rated": m.scalar("select coalesce(sum(games), 0) from mart_rating_coverage where study = ? and "
                              "category = 'rated'", [study]) if m.has("mart_rating_coverage") else None,
            "random_play": next((p["random_play"] for p in pairs if p.get("random_play") is not None), None)}


@register(
    PATH,
    "Leaderboard",
    "Who is strongest, as mafia and as town, and how sure we are: ratings with intervals, head to head, replays.",
    order=15,
)
def build(ctx: Context) -> Page:
    m = ctx.marts
    page = Page(PATH, "Leaderboard: skill ratings by side, with uncertainty", "leaderboard.html.j2",
                {"available": m.has("mart_ratings"), "rows": []})
    if not page.data["available"]:
        return page
    rows = m.rows(f"select * from mart_ratings order by study, {SIDE_ORDER}, side, rank nulls last, rating desc, model")
    studies = _studies(m)
    fits = m.rows("select * from mart_rating_fit order by study, case fit when 'overall' then 0 when 'sides' then 1 "
                  "else 2 end") if m.has("mart_rating_fit") else []
    calibration = m.rows("select * from mart_rating_calibration order by study, fit, bin") \
        if m.has("mart_rating_calibration") else []
    # A model whose seats an importer inferred (the web game's session labels) is marked wherever the page names it:
    # `(inferred)` when every one of its seats in the study was, `(inferred in some games)` when some were.
    inferred = inferred_seats(m, by="study")
    for r in rows:
        r["row_class"] = "" if r.get("rated", True) else "not-rated"
        r["model_inferred"] = (r["study"], r["model"]) in inferred
        r["model_mark"] = inferred_mark(inferred.get((r["study"], r["model"])))
    for f in fits:  # the directions the games do not set name models by their weights (`+0.22 X`)
        if f.get("unidentified_directions"):
            f["unidentified_directions"] = mark_named(
                str(f["unidentified_directions"]),
                {model: str(inferred_mark(every)) for (study, model), every in inferred.items() if study == f["study"]},
                before=r"[+-]\d+\.\d+ ", after=r" |;|$")
    scatter = _scatter_rows(rows)
    page.data.update(
        rows=rows,
        studies=studies,
        fits=fits,
        scatter=scatter,
        not_rated=sum(1 for r in rows if not r.get("rated", True)),
        inferred=sorted({(r["study"], r["model"]) for r in rows if r["model_inferred"]}),
        coverage=m.rows("select * from mart_rating_coverage order by study, category"),
        self_play=m.rows("select * from mart_self_play order by study, model") if m.has("mart_self_play") else [],
        matrices=[_matrix(m, s, inferred) for s in studies[:5]] if m.has("mart_head_to_head") else [],
        not_converged=sum(1 for r in rows if not r["converged"]),
        costs=m.rows(
            """select provider || '/' || model as model, sum(n_games) as n_games,
                      (sum(input_tokens) + sum(output_tokens)) / nullif(sum(n_games), 0) as tokens_per_game,
                      sum(cost_usd) / nullif(sum(n_games), 0) as cost_usd_per_game, bool_and(fully_priced) as priced
               from mart_cell_costs group by 1 order by 1"""
        ) if m.has("mart_cell_costs") else [],
    )
    page.add_export("ratings", rows)
    if m.has("mart_head_to_head"):
        pairs = m.rows("select * from mart_head_to_head order by study, mafia_model, town_model")
        page.add_export("head_to_head", pairs)
    if rows:
        page.add_chart("ratings", charts.ratings_chart(_labelled(rows, inferred), studies=studies),
                       "Ratings with 95% intervals, overall and by side (choose the study above).")
        if scatter:
            page.add_chart("scatter", charts.deceiver_detector_chart(_labelled(scatter, inferred), studies=studies),
                           "Each model rated on both sides: as mafia (deceiving) against as town (detecting), with "
                           "95% intervals; hover a point for its model (the same figures are in the table below).")
    if calibration:
        page.add_export("calibration", calibration)
        page.add_chart("calibration", charts.rating_calibration_chart(calibration, studies=studies),
                       "Held-out predicted against observed mafia win rate, binned by prediction, with Wilson 95% "
                       "intervals; on the diagonal the predictions are calibrated.")
    if fits:
        page.add_export("fit", fits)
    return page

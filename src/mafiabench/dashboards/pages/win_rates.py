"""Win rates by experiment, prompt version, cell and model in each role (`mart_win_rates`), and where each
adaptive-sample-size cell stopped (`mart_stopping`)."""

from __future__ import annotations

from mafiabench.dashboards import charts
from mafiabench.dashboards.data import cell_mark, inferred_cells, inferred_label, inferred_seats, marked, options
from mafiabench.dashboards.html import Page
from mafiabench.dashboards.page_registry import Context, register

TABLE_DIMENSIONS = ("all", "experiment", "study", "prompt_version", "source")


@register(
    "win-rates.html",
    "Win rates",
    "Win rates by experiment, prompt version, cell and model in each role.",
    order=10,
)
def build(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("win-rates.html", "Win rates", "win_rates.html.j2", {"available": m.has("mart_win_rates")})
    if not page.data["available"]:
        return page
    # A model its study played under several settings has a row per setting: the label says which.
    rows = m.rows(
        "select * replace (case when model_settings <> '' then value || ' (' || model_settings || ')' "
        "else value end as value), value as model from mart_win_rates where n > 0 order by variant, dimension, value"
    )
    # A model whose seats an importer inferred (the web game's session labels) is marked where it is named.
    # A cell's label names its models: one whose games' background was inferred is marked `(background inferred)`.
    inferred, backgrounds = inferred_seats(m, by="variant"), inferred_cells(m, by="variant")
    marked_cells = False
    for r in rows:
        raw = r.pop("model")
        if str(r["dimension"]).startswith("model_as_"):
            r["value"] = inferred_label(r["value"], inferred.get((r["variant"], raw)))
        elif r["dimension"] == "cell" and (mark := cell_mark(backgrounds.get((r["variant"], raw)))):
            r["value"], marked_cells = marked(r["value"], mark), True
    page.data["inferred"] = bool(inferred)
    page.data["inferred_cells"] = marked_cells
    if rows:
        dims = options(r["dimension"] for r in rows)
        variants = options(r["variant"] for r in rows)
        page.add_chart(
            "win-rates",
            charts.win_rate_chart(rows, dimensions=dims, variants=variants),
            "Win rates by the chosen grouping.",
        )
    page.data["rows"], page.data["same_as_overall"] = overall_table(rows)
    page.data["stopping"] = stopping_rules(ctx)
    return page


def overall_table(rows: list[dict[str, object]]) -> tuple[list[dict[str, object]], list[str]]:
    """The table's rows, and the groupings left out of it: a grouping with one value in a variant (one experiment,
    one study, one prompt version or one source) repeats the variant's overall row figure for figure, so its rows
    say nothing the overall row does not (a study's page listed the same row five times)."""
    table = [r for r in rows if r["dimension"] in TABLE_DIMENSIONS]
    values: dict[tuple[object, object], set[object]] = {}
    for r in table:
        values.setdefault((r["variant"], r["dimension"]), set()).add(r["value"])
    kept = [r for r in table if r["dimension"] == "all" or len(values[(r["variant"], r["dimension"])]) > 1]
    left_out = sorted({str(d) for (_, d), v in values.items() if d != "all" and len(v) == 1})
    return kept, left_out


def stopping_rules(ctx: Context) -> list[dict[str, object]]:
    """One block per experiment with a [stopping] rule: the rule in words and each cell where it stopped."""
    m = ctx.marts
    if not m.has("mart_stopping"):
        return []
    out: dict[str, dict[str, object]] = {}
    for r in m.rows("select * from mart_stopping order by experiment, cell"):
        block = out.setdefault(r["experiment"], {"experiment": r["experiment"], "rule": r["rule_description"],
                                                 "run_id": r["run_id"], "cells": []})
        block["cells"].append(r)  # type: ignore[attr-defined]
    return list(out.values())

"""Reasoning failures (Level 1 and 2), format failures, and outcomes decided by a random fallback vote
(`mart_reasoning_failures`, `mart_format_failures`, `mart_win_rates`)."""

from __future__ import annotations

from typing import Any

from mafiabench.dashboards import charts
from mafiabench.dashboards.data import (
    PERSON_FORMAT_MARK,
    cell_mark,
    inferred_cells,
    inferred_mark,
    inferred_seats,
    marked,
    offline,
    options,
    person,
)
from mafiabench.dashboards.html import Page, games_url
from mafiabench.dashboards.page_registry import Context, register


def label_models(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row's `model_label`: the model, and beside it the prompt version where the row's variant was played
    under several (a prompt ablation, `v4.1-full` against `v4.1-condensed`: each version is its own experiment)."""
    versions: dict[Any, set[Any]] = {}
    for r in rows:
        versions.setdefault(r.get("variant"), set()).add(r.get("prompt_version"))
    for r in rows:
        several = len(versions[r.get("variant")]) > 1
        r["model_label"] = f"{r.get('model')} · {r.get('prompt_version')}" if several else r.get("model")
    return rows


def mark_models(rows: list[dict[str, Any]], inferred: dict[tuple[str, str], bool], *,
                people: bool = False) -> list[dict[str, Any]]:
    """Each row's `model_mark`: `inferred` or `inferred in some games` where an importer inferred the model of all or
    some of its seats in the row's variant (`inferred_seats`: the web game's session labels); with `people`, a
    person's row (the model `human`) `PERSON_FORMAT_MARK`, their failures being the interface's reading of them."""
    for r in rows:
        if people and person(r.get("model")):
            r["model_mark"], r["mark_class"] = PERSON_FORMAT_MARK, "person"
        else:
            r["model_mark"] = inferred_mark(inferred.get((str(r.get("variant")), str(r.get("model")))))
            r["mark_class"] = "inferred"
    return rows


def _charted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A chart's rows with each model's label marked as the table marks it (the chart's axis and tooltip show the
    label as data, `X (inferred)`); the table's rows keep the label and mark apart, and links the model itself."""
    return [{**r, "model_label": marked(str(r["model_label"]), r.get("model_mark"))} for r in rows]


def _role_key(row: dict[str, Any]) -> str:
    """Filter the games list by the model in this row's role, or by the model anywhere when the role is unknown."""
    role = str(row.get("role") or "")
    return role if role and not role.startswith("(") else "model"


@register(
    "failures.html",
    "Failures",
    "Reasoning failures (Level 1 and 2) and format failures by model (and prompt version).",
    order=50,
)
def build(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("failures.html", "Reasoning and format failures", "failures.html.j2", {"inferred_cells": False})
    reasoning = formats = fallback_overall = None
    # A model whose seats an importer inferred is marked where the page names it, per variant (its rows' key).
    inferred = inferred_seats(m, by="variant")
    if m.has("mart_reasoning_failures"):
        reasoning = mark_models(label_models(
            m.rows("select * from mart_reasoning_failures order by variant, level, model, prompt_version")
        ), inferred)
        for r in reasoning:
            r["n"], r["k"] = r.get("n_opportunities"), r.get("n_failures")
            r["level_label"] = f"Level {r['level']} ({r.get('role') or ''})"
            r["link"] = games_url({_role_key(r): r.get("model")})
        if reasoning:
            page.add_chart(
                "reasoning",
                charts.reasoning_chart(_charted(reasoning), variants=options(r["variant"] for r in reasoning)),
                "Reasoning-failure rate per model.",
            )
    if m.has("mart_format_failures"):
        formats = mark_models(label_models(
            m.rows("select * from mart_format_failures order by variant, model, prompt_version, role, action")
        ), inferred, people=True)
        for r in formats:
            r["n"], r["k"] = r.get("n_decisions"), r.get("n_format_failures")
            r["link"] = games_url({_role_key(r): r.get("model")}, flag="format failure")
        if formats:
            page.add_chart(
                "format",
                charts.format_failure_chart(_charted(formats), variants=options(r["variant"] for r in formats)),
                "Format-failure rate per model, by action and role.",
            )
    page.data["offline_failing"] = sorted({str(r["model"]) for r in (reasoning or []) + (formats or [])
                                           if offline(r.get("model")) and (r.get("k") or 0) > 0})
    # A person's format failure is the interface's reading of what they typed (importers: the model `human`): the
    # page says so wherever it shows a person's row, failed or not (the row is marked).
    page.data["people_shown"] = any(person(r.get("model")) for r in formats or [])
    page.data["inferred"] = any(r.get("model_mark") and r.get("mark_class") == "inferred"
                                for r in (reasoning or []) + (formats or []))
    if m.has("mart_win_rates"):
        cells = m.rows(
            "select * from mart_win_rates where dimension = 'cell' and team = 'mafia' and n > 0 order by variant, value"
        )
        fallback_overall = m.rows(
            "select variant, n, n_fallback_decided, share_fallback_decided from mart_win_rates "
            "where dimension = 'all' and team = 'mafia' order by variant"
        )
        # a cell's label names its models: one whose background an importer inferred is marked (links: none here)
        backgrounds = inferred_cells(m, by="variant")
        for r in cells:
            r["cell_mark"] = cell_mark(backgrounds.get((r["variant"], r["value"])))
            r["value"] = marked(str(r["value"]), r["cell_mark"])
        page.data["inferred_cells"] = any(r["cell_mark"] for r in cells)
        if cells:
            page.add_chart(
                "fallback",
                charts.fallback_share_chart(cells, variants=options(r["variant"] for r in cells)),
                "Share of each cell's games whose deciding vote needed a random fallback.",
            )
    page.data.update(reasoning=reasoning, formats=formats, fallback_overall=fallback_overall)
    return page

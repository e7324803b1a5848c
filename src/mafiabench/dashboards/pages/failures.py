"""Reasoning failures (Level 1 and 2), format failures, and outcomes decided by a random fallback vote
(`mart_reasoning_failures`, `mart_format_failures`, `mart_win_rates`)."""

from __future__ import annotations

from typing import Any

from mafiabench.dashboards import charts
from mafiabench.dashboards.data import offline, options
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
    page = Page("failures.html", "Reasoning and format failures", "failures.html.j2")
    reasoning = formats = fallback_overall = None
    if m.has("mart_reasoning_failures"):
        reasoning = label_models(
            m.rows("select * from mart_reasoning_failures order by variant, level, model, prompt_version")
        )
        for r in reasoning:
            r["n"], r["k"] = r.get("n_opportunities"), r.get("n_failures")
            r["level_label"] = f"Level {r['level']} ({r.get('role') or ''})"
            r["link"] = games_url({_role_key(r): r.get("model")})
        if reasoning:
            page.add_chart(
                "reasoning",
                charts.reasoning_chart(reasoning, variants=options(r["variant"] for r in reasoning)),
                "Reasoning-failure rate per model.",
            )
    if m.has("mart_format_failures"):
        formats = label_models(
            m.rows("select * from mart_format_failures order by variant, model, prompt_version, role, action")
        )
        for r in formats:
            r["n"], r["k"] = r.get("n_decisions"), r.get("n_format_failures")
            r["link"] = games_url({_role_key(r): r.get("model")}, flag="format failure")
        if formats:
            page.add_chart(
                "format",
                charts.format_failure_chart(formats, variants=options(r["variant"] for r in formats)),
                "Format-failure rate per model, by action and role.",
            )
    page.data["offline_failing"] = sorted({str(r["model"]) for r in (reasoning or []) + (formats or [])
                                           if offline(r.get("model")) and (r.get("k") or 0) > 0})
    # A person's format failure is the interface's reading of what they typed (importers: the model `human`).
    page.data["people_failing"] = any(r.get("model") == "human" and (r.get("k") or 0) > 0 for r in formats or [])
    if m.has("mart_win_rates"):
        cells = m.rows(
            "select * from mart_win_rates where dimension = 'cell' and team = 'mafia' and n > 0 order by variant, value"
        )
        fallback_overall = m.rows(
            "select variant, n, n_fallback_decided, share_fallback_decided from mart_win_rates "
            "where dimension = 'all' and team = 'mafia' order by variant"
        )
        if cells:
            page.add_chart(
                "fallback",
                charts.fallback_share_chart(cells, variants=options(r["variant"] for r in cells)),
                "Share of each cell's games whose deciding vote needed a random fallback.",
            )
    page.data.update(reasoning=reasoning, formats=formats, fallback_overall=fallback_overall)
    return page

"""Aggregate capability scores: bottom-up z-scores (`mart_capability_scores`) and the top-down latent ability
model (`mart_latent_abilities`, `mart_latent_fit`)."""

from __future__ import annotations

import math
from typing import Any

from mafiabench.dashboards import charts
from mafiabench.dashboards.data import (
    inferred_mark,
    inferred_seats,
    mark_named,
    marked,
    offline,
    protocol_cards,
    studies_by_size,
)
from mafiabench.dashboards.html import Page
from mafiabench.dashboards.page_registry import Context, register

LATENT_LABELS = {  # NUTS rows hold m, d, v (the reference's model); the point-estimate fallback a, b, ln c
    "deceive": "deceive: m or a (as mafioso)",
    "disclose": "disclose: d or b (as detective)",
    "detect": "detect: v or ln c (as villager)",
}


def plot_scale(r: dict[str, Any]) -> None:
    """Plot c on the log scale it is estimated on (its interval is exp of a symmetric one); a and b as they are."""
    r["label"] = LATENT_LABELS.get(r.get("ability") or "", r.get("ability"))
    keys = ("estimate", "ci_low", "ci_high")
    if r.get("parameter") == "c":
        for k in keys:
            v = r.get(k)
            r[f"plot_{k}"] = math.log(v) if isinstance(v, int | float) and v > 0 else None
    else:
        for k in keys:
            r[f"plot_{k}"] = r.get(k)


@register(
    "capability-scores.html",
    "Scores",
    "Aggregate capability scores: bottom-up z-scores and the top-down latent ability model, with intervals.",
    order=30,
)
def build(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("capability-scores.html", "Aggregate capability scores", "scores.html.j2")
    scores = latent = fits = None
    # A model whose seats an importer inferred (the web game's session labels) is marked wherever the page names it,
    # per study: `(inferred)`, or `(inferred in some games)`; the charts name it so as data.
    inferred = inferred_seats(m, by="study")
    if m.has("mart_capability_scores"):
        scores = m.rows("select * from mart_capability_scores order by study, capability, target_model")
        for r in scores:
            r["model_mark"] = inferred_mark(inferred.get((r["study"], r["target_model"])))
        if scores:
            studies = studies_by_size(m, "mart_capability_scores")
            page.add_chart(
                "bottom-up",
                charts.scores_chart([{**r, "target_model": marked(r["target_model"], r["model_mark"])}
                                     for r in scores], studies=studies),
                "Bottom-up scores with 95% intervals (log scale).",
            )
    if m.has("mart_latent_abilities"):
        latent = m.rows("select * from mart_latent_abilities order by study, ability, model")
        for r in latent:
            plot_scale(r)
            r["model_mark"] = inferred_mark(inferred.get((r["study"], r["model"])))
        if latent:
            studies = studies_by_size(m, "mart_latent_abilities")
            page.add_chart(
                "top-down", charts.latent_chart([{**r, "model": marked(r["model"], r["model_mark"])} for r in latent],
                                                studies=studies),
                "Latent abilities with 95% intervals (NUTS: credible; the point-estimate fallback: Laplace), "
                "widened where the games scatter beyond the model (the fit table's chi² / df above 1).",
            )
    if m.has("mart_latent_fit"):
        fits = m.rows("select * from mart_latent_fit order by study")
        for r in fits:
            if r.get("status") == "not_fitted" and r.get("reason"):
                reason = mark_reason(str(r["reason"]), {
                    model: str(inferred_mark(every)) for (study, model), every in inferred.items()
                    if study == r["study"]})
                r["reason"], r["reason_marked"] = reason, reason != r["reason"]
    page.data.update(scores=scores, latent=latent, fits=fits, cards=protocol_cards(m),
                     offline_fits=offline_fits(latent or [], fits or []),
                     inferred=any(r.get("model_mark") for r in (scores or []) + (latent or []))
                     or any(r.get("reason_marked") for r in fits or []))
    return page


def mark_reason(reason: str, marks: dict[str, str]) -> str:
    """A not-fitted fit's reason with each model it names in a role (`one model in every role (mafioso human,
    detective openai/gpt-4o-mini, …)`, transform.models.latent.not_fitted_reason) followed by its mark, as
    `detective openai/gpt-4o-mini (inferred)` (`mark_named`)."""
    return mark_named(reason, marks, before=r"\b(?:mafioso|detective|villager) ", after=r", |\)")


def offline_fits(latent: list[dict[str, Any]], fits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The studies whose latent fit is troubled (not converged, divergent transitions, a model not placed) and whose
    players are all built-in offline ones: there that is expected (fixed rules, not skill), and the page says so. A
    study the model was not fitted to (`status` not_fitted) says why in its own row."""
    players: dict[Any, set[Any]] = {}
    unsettled: set[Any] = set()  # studies with an ability row whose sampling did not converge
    for r in latent:
        players.setdefault(r.get("study"), set()).add(r.get("model"))
        if r.get("converged") is False:
            unsettled.add(r.get("study"))
    out = []
    for f in fits:
        models = players.get(f.get("study")) or set()
        troubled = f.get("status") != "not_fitted" and (
            f.get("converged") is False or f.get("study") in unsettled or (f.get("divergences") or 0) > 0
            or (f.get("n_not_identified") or 0) > 0)
        if troubled and models and all(offline(x) for x in models):
            out.append({"study": f.get("study"), "models": ", ".join(sorted(map(str, models)))})
    return out

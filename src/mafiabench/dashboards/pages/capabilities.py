"""One page per capability (deceive, detect, disclose): each target model's win rate per background, with the
exact no-skill baselines read from `mart_baselines` (the dashboards read only the warehouse)."""

from __future__ import annotations

import functools
from typing import Any

from mafiabench.dashboards import charts
from mafiabench.dashboards.data import Marts, studies_by_size
from mafiabench.dashboards.html import Page, games_url
from mafiabench.dashboards.page_registry import Context, register

CAPABILITIES = {
    "deceive": (
        "Deceive",
        "The target model plays the mafioso; the background fixes the detective and villagers. "
        "Score: the mafia win rate.",
    ),
    "detect": (
        "Detect",
        "The target model plays the villager who is still alive by day; the background fixes the mafioso and "
        "the detective. Score: the town win rate.",
    ),
    "disclose": (
        "Disclose",
        "The target model plays the detective, who knows the mafioso after night 1; the background fixes the "
        "mafioso and villagers. Score: the town win rate.",
    ),
}


def baselines(m: Marts) -> list[dict[str, Any]]:
    """The exact analytic baselines (`mart_baselines`), in the keys the charts and the table use."""
    if not m.has("mart_baselines"):
        return []
    # No `order by`: the table's insertion order is the profiles' order in mafiabench.transform.models.baselines.
    return m.rows(
        """select "case" as profile, description, night, town_win_probability as town_win, town_win_fraction,
                  mafia_win_probability as mafia_win, mafia_win_fraction, town_win_after_tie
           from mart_baselines"""
    )


def night_modes(m: Marts) -> dict[str, list[str]]:
    if not (m.has("fct_games") and "night_mode" in m.columns("fct_games")):
        return {}
    rows = m.rows(
        "select distinct study, coalesce(night_mode, 'scripted') as night from fct_games where variant = 'mini-mafia'"
    )
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r["study"], []).append(r["night"])
    return out


def build(ctx: Context, capability: str) -> Page:
    m = ctx.marts
    title, explanation = CAPABILITIES[capability]
    page = Page(
        f"capability-{capability}.html",
        f"{title}: win rate of each target model per background",
        "capability.html.j2",
        {
            "available": m.has("mart_capability_win_rates"),
            "explanation": explanation,
            "team": "mafia" if capability == "deceive" else "town",
            "rows": [],
        },
    )
    if not page.data["available"]:
        return page
    rows = m.rows(
        "select * from mart_capability_win_rates where capability = ? and n > 0 "
        "order by study, background, target_model",
        [capability],
    )
    for r in rows:  # each bar opens the list of the games behind it, by the cell's name as the mart forms it
        r["link"] = games_url(study=r["study"], bar=r["capability_cell"])
        if r.get("background_inferred"):  # an importer's reading of the models, not the source's record
            r["background"] = f"{r['background']} (inferred)"
    page.data["rows"] = rows
    page.data["inferred"] = any(r.get("background_inferred") for r in rows)
    if not rows:
        return page
    base = baselines(m)
    studies = [s for s in studies_by_size(m, "mart_capability_win_rates") if any(r["study"] == s for r in rows)]
    spec = charts.capability_chart(rows, base, capability=capability, studies=studies, night_modes=night_modes(m))
    page.add_chart(capability, spec, f"{title}: win rate per background (choose the study above).")
    page.data.update(baselines=base, chart_key=capability)
    return page


for _order, _cap in enumerate(CAPABILITIES, start=20):
    register(f"capability-{_cap}.html", CAPABILITIES[_cap][0], CAPABILITIES[_cap][1], order=_order)(
        functools.partial(build, capability=_cap)
    )

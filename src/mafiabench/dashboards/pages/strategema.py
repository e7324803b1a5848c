"""The multi-night belief protocol's tables (Strategema): win rates per configuration (Table 1), with and without
the speaking phase (Table 2), the ablations on one configuration (Table 3), consistency of winners against losers
(Welch t-test), semantic coherence against deception, and belief answers cut by their token cap
(`mart_classic_configurations`, `mart_consistency_tests`, `mart_coherence_summary`, `mart_belief_fallbacks`)."""

from __future__ import annotations

import math
from typing import Any

from mafiabench.dashboards import charts
from mafiabench.dashboards.html import Page
from mafiabench.dashboards.page_registry import Context, register

ABLATIONS = ("baseline", "no_speaking", "argmax_voting", "limited_memory")
ABLATION_SETTING = (8, 2)  # the configuration the reference ran its ablations on


def setting(r: dict[str, Any]) -> str:
    return f"N={r['n_players']}, M={r['n_mafia']}"


def table1(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (N, M), the baseline configuration: games, mafia win rate ± standard error, town win rate."""
    return [r for r in rows if r["configuration"] == "baseline"]


def table2(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (N, M) with both: mafia win rate with the speaking phase (baseline) and without it (no_speaking)."""
    by = {(r["n_players"], r["n_mafia"], r["configuration"]): r for r in rows}
    out = []
    for (n, m, conf), with_ in sorted(by.items()):
        without = by.get((n, m, "no_speaking"))
        if conf != "baseline" or without is None:
            continue
        out.append(
            {
                "n_players": n,
                "n_mafia": m,
                "with": with_,
                "without": without,
                "difference": with_["mafia_win_rate"] - without["mafia_win_rate"],
                "difference_se": math.sqrt(with_["standard_error"] ** 2 + without["standard_error"] ** 2),
            }
        )
    return out


def table3(rows: list[dict[str, Any]]) -> tuple[tuple[int, int] | None, list[dict[str, Any]]]:
    """The ablations (baseline, no speaking, argmax voting, limited memory) of one configuration: (8, 2) when it
    has them, else the (N, M) with the most ablations played."""
    counts: dict[tuple[int, int], int] = {}
    for r in rows:
        if r["configuration"] in ABLATIONS:
            key = (r["n_players"], r["n_mafia"])
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return None, []
    chosen = ABLATION_SETTING if counts.get(ABLATION_SETTING, 0) > 1 else max(counts, key=lambda k: (counts[k], k))
    picked = [r for r in rows if (r["n_players"], r["n_mafia"]) == chosen and r["configuration"] in ABLATIONS]
    return chosen, sorted(picked, key=lambda r: ABLATIONS.index(r["configuration"]))


@register(
    "strategema.html",
    "Belief protocol",
    "Multi-night belief games: win rates per configuration, speaking, ablations, consistency, coherence.",
    order=35,
)
def build(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("strategema.html", "Multi-night belief protocol (Strategema tables)", "strategema.html.j2")
    configs = None
    if m.has("mart_classic_configurations"):
        configs = m.rows("select * from mart_classic_configurations order by n_players, n_mafia, configuration")
        for r in configs:
            r["setting"] = setting(r)
            r["rate"] = r["mafia_win_rate"]
        if configs:
            page.add_chart(
                "configurations",
                charts.strategema_chart(configs),
                "Mafia win rate per configuration: Beta posterior mean and Wilson 95% interval.",
            )
    chosen, ablations = table3(configs or [])
    consistency = (
        m.rows("select * from mart_consistency_tests where variant = 'classic'")
        if m.has("mart_consistency_tests")
        else None
    )
    coherence = m.rows("select * from mart_coherence_summary") if m.has("mart_coherence_summary") else None
    fallbacks = (
        m.rows("select * from mart_belief_fallbacks where variant = 'classic' order by model, action")
        if m.has("mart_belief_fallbacks")
        else None
    )
    page.data.update(
        configs=configs,
        table1=table1(configs or []),
        table2=table2(configs or []),
        ablation_setting=chosen,
        table3=ablations,
        consistency=consistency,
        coherence=coherence[0] if coherence else None,
        coherence_available=coherence is not None,
        fallbacks=fallbacks,
    )
    return page

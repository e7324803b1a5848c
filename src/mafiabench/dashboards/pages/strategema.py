"""The multi-night belief protocol's tables (Strategema) in the paper's layout, one set per study: Table 1 (mafia
win rate per configuration, with R and a standard error), Table 2 (with and without the speaking phase on every
configuration), Table 3 (the ablations on one configuration), the cross-check models, the consistency t-tests, and
semantic coherence against deception (`mart_classic_configurations`, `mart_consistency_tests`,
`mart_coherence_summary`, `mart_belief_fallbacks`). Each study's three tables are exported as CSV beside the page
(`strategema.<study>.table1.csv`, ...)."""

from __future__ import annotations

import math
from typing import Any

from mafiabench.dashboards import charts
from mafiabench.dashboards.data import games_by_variant, protocol_cards
from mafiabench.dashboards.html import Page, study_slug
from mafiabench.dashboards.page_registry import Context, register

ABLATIONS = ("baseline", "no_speaking", "argmax_voting", "limited_memory")
ABLATION_SETTING = (8, 2)  # the configuration the reference ran its ablations on


def setting(r: dict[str, Any]) -> str:
    return f"N={r['n_players']}, M={r['n_mafia']}"


def main_arm(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of the study's main arm (its main model and prompt version), every condition."""
    return [r for r in rows if r.get("is_main_arm", True)]


def table1(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (N, M), the main arm's baseline: games, mafia win rate ± standard error, villager win rate."""
    return [r for r in main_arm(rows) if r["configuration"] == "baseline"]


def table2(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (N, M) of the main arm played both ways: the mafia win rate with the speaking phase (baseline) and
    without it (no_speaking), and the reduction as the paper signs it: without minus with (positive = speaking
    lowers the mafia's win rate), with the standard error of a difference of independent rates."""
    by = {(r["n_players"], r["n_mafia"], r["configuration"]): r for r in main_arm(rows)}
    out = []
    for (n, m, conf), with_ in sorted(by.items()):
        without = by.get((n, m, "no_speaking"))
        if conf != "baseline" or without is None:
            continue
        out.append(
            {
                "n_players": n,
                "n_mafia": m,
                "mafia_ratio": with_.get("mafia_ratio", m / n),
                "with": with_,
                "without": without,
                "reduction": without["mafia_win_rate"] - with_["mafia_win_rate"],
                "reduction_se": math.sqrt(with_["standard_error"] ** 2 + without["standard_error"] ** 2),
            }
        )
    return out


def table3(rows: list[dict[str, Any]]) -> tuple[tuple[int, int] | None, list[dict[str, Any]]]:
    """The main arm's ablations (baseline, no speaking, argmax voting, limited memory) of one configuration: (8, 2)
    when it has them, else the (N, M) with the most ablations played; none where no (N, M) has two conditions."""
    arm = main_arm(rows)
    counts: dict[tuple[int, int], int] = {}
    for r in arm:
        if r["configuration"] in ABLATIONS:
            key = (r["n_players"], r["n_mafia"])
            counts[key] = counts.get(key, 0) + 1
    if not counts or max(counts.values()) < 2:
        return None, []
    chosen = ABLATION_SETTING if counts.get(ABLATION_SETTING, 0) > 1 else max(counts, key=lambda k: (counts[k], k))
    picked = [r for r in arm if (r["n_players"], r["n_mafia"]) == chosen and r["configuration"] in ABLATIONS]
    return chosen, sorted(picked, key=lambda r: ABLATIONS.index(r["configuration"]))


def cross_checks(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Baseline rows of the other arms (the paper's Claude 3 Sonnet games), beside the main arm's rate on the same
    (N, M)."""
    main = {(r["n_players"], r["n_mafia"]): r for r in table1(rows)}
    out = []
    for r in rows:
        if r.get("is_main_arm", True) or r["configuration"] != "baseline":
            continue
        out.append({**r, "main": main.get((r["n_players"], r["n_mafia"]))})
    return out


def _pct(x: Any) -> Any:
    return None if x is None else round(100 * float(x), 2)


def exports(table_1: list[dict[str, Any]], table_2: list[dict[str, Any]], table_3: list[dict[str, Any]]
            ) -> dict[str, list[dict[str, Any]]]:
    """The three tables for CSV, in the paper's columns (percentages as the paper prints them)."""
    return {
        "table1": [
            {"players_n": r["n_players"], "mafia_m": r["n_mafia"], "ratio_r": round(r["mafia_ratio"], 3),
             "mafia_win_rate_pct": _pct(r["mafia_win_rate"]), "std_error_pct": _pct(r["standard_error"]),
             "villager_win_rate_pct": _pct(r["town_win_rate"]), "games": r["n"]}
            for r in table_1
        ],
        "table2": [
            {"players_n": r["n_players"], "mafia_m": r["n_mafia"], "ratio_r": round(r["mafia_ratio"], 3),
             "with_speaking_pct": _pct(r["with"]["mafia_win_rate"]),
             "without_speaking_pct": _pct(r["without"]["mafia_win_rate"]), "reduction_pct": _pct(r["reduction"]),
             "reduction_se_pct": _pct(r["reduction_se"]), "games_with": r["with"]["n"],
             "games_without": r["without"]["n"]}
            for r in table_2
        ],
        "table3": [
            {"condition": r["configuration"], "mafia_win_rate_pct": _pct(r["mafia_win_rate"]),
             "deception_score": r["mean_deception_score"], "strategic_consistency": r["mean_consistency_jsd"],
             "games": r["n"]}
            for r in table_3
        ],
    }



@register(
    "strategema.html",
    "Belief protocol",
    "Multi-night belief games (Strategema): the paper's three tables per study, consistency tests, coherence.",
    order=35,
)
def build(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("strategema.html", "Multi-night belief protocol (Strategema tables)", "strategema.html.j2",
                {"why_empty": None})
    if m.has("fct_games") and not m.scalar("select count(*) from fct_games where variant = 'classic'"):
        # Every section would be empty, each repeating what the warehouse holds: say why once, show none of them.
        page.data["why_empty"] = (
            f"This warehouse holds no multi-night (classic) game ({games_by_variant(m)}), so there is nothing to "
            "tabulate here yet. Offline, mafiabench run experiments/strategema_offline.toml --publish plays it into "
            "its own warehouse (warehouse/strategema-offline.duckdb), whose pages are "
            "dashboards-strategema-offline/strategema.html, not these; add --warehouse with this warehouse's file "
            "to play it here instead, or point the dashboards at a warehouse that has such games."
        )
        return page
    configs = None
    if m.has("mart_classic_configurations"):
        configs = m.rows(
            "select * from mart_classic_configurations "
            "order by study, not is_main_arm, model, prompt_version, n_players, n_mafia, configuration"
        )
    tests = m.rows("select * from mart_consistency_tests") if m.has("mart_consistency_tests") else None
    coherence = m.rows("select * from mart_coherence_summary") if m.has("mart_coherence_summary") else None
    studies: list[dict[str, Any]] = []
    taken: set[str] = set()
    for study in dict.fromkeys(r["study"] for r in configs or []):
        rows = [r for r in configs or [] if r["study"] == study]
        for r in rows:
            r["setting"] = setting(r)
            r["rate"] = r["mafia_win_rate"]
        name = study_slug(study, taken)
        key = f"configurations-{name}"
        page.add_chart(
            key,
            charts.strategema_chart(main_arm(rows)),
            "Mafia win rate per condition (main arm): Beta posterior mean and Wilson 95% interval.",
        )
        t1, t2 = table1(rows), table2(rows)
        chosen, t3 = table3(rows)
        files = [page.add_export(f"{name}.{table}", rows_) for table, rows_ in exports(t1, t2, t3).items() if rows_]
        arm = next((r for r in rows if r["is_main_arm"]), rows[0])
        studies.append(
            {
                "study": study,
                "anchor": f"study-{name}",
                "chart": key,
                "model": arm["model"],
                "prompt_version": arm["prompt_version"],
                "table1": t1,
                "table2": t2,
                "ablation_setting": chosen,
                "table3": t3,
                "cross_checks": cross_checks(rows),
                "configs": rows,
                "exports": files,
                "tests": [r for r in tests or [] if r["study"] == study],
                "coherence": next((r for r in coherence or [] if r["study"] == study), None),
                "cards": protocol_cards(m, [study]),
            }
        )
    fallbacks = (
        m.rows("select * from mart_belief_fallbacks where variant = 'classic' order by model, action")
        if m.has("mart_belief_fallbacks")
        else None
    )
    page.data.update(
        configs=configs,
        studies=studies,
        tests_available=tests is not None,
        coherence_available=coherence is not None,
        fallbacks=fallbacks,
    )
    return page

"""The index: the study in numbers, provenance, a card per page, games per study by outcome."""

from __future__ import annotations

from typing import Any

from mafiabench.dashboards import charts
from mafiabench.dashboards.html import Page, fmt_int
from mafiabench.dashboards.page_registry import Context, register, registered

# Each game in exactly one class, so the counts add up to the games (an invalid game was also counted failed or
# unfinished: 23 of 20 games on an imported warehouse). The order is the outcome chart's: invalid, failed, then
# valid games without a winner (unfinished, abandoned), then scored.
GAME_OUTCOME_COUNTS = """count(*) filter (where is_scored) as scored,
                  count(*) filter (where not is_scored and not coalesce(valid, true)) as invalid,
                  count(*) filter (where not is_scored and coalesce(valid, true) and status = 'failed') as failed,
                  count(*) filter (where not is_scored and coalesce(valid, true) and status <> 'failed')
                      as unfinished"""


def outcome_counts_text(g: dict[str, Any]) -> str:
    return (f"{fmt_int(g.get('scored'))} scored + {fmt_int(g.get('invalid'))} invalid + {fmt_int(g.get('failed'))} "
            f"failed + {fmt_int(g.get('unfinished'))} unfinished or without a winner = {fmt_int(g.get('games'))}")


@register("index.html", "Overview", "The study in numbers.", order=0)
def build(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("index.html", "Mafia benchmark: the study in numbers", "index.html.j2", {"has_games": False})
    if not m.has("fct_games"):
        return page
    g = m.one(
        f"""select count(*) as games, {GAME_OUTCOME_COUNTS},
                  count(distinct experiment) as experiments, count(distinct study) as studies,
                  count(distinct cell) as cells,
                  string_agg(distinct variant, ', ' order by variant) as variants,
                  string_agg(distinct prompt_version, ', ' order by prompt_version) as prompt_versions
           from fct_games"""
    )
    n_models = m.scalar("select count(*) from dim_models") if m.has("dim_models") else None
    prov: dict[str, Any] = {}
    if {"landed_at", "package_version", "git_commit"} <= m.columns("fct_games"):
        prov = m.one(
            """select min(landed_at) as first_landed, max(landed_at) as last_landed,
                      string_agg(distinct package_version, ', ' order by package_version) as versions,
                      string_agg(distinct git_commit, ', ' order by git_commit) as commits
               from fct_games"""
        )
    tiles = [
        ("games", fmt_int(g.get("games"))),
        ("scored games", fmt_int(g.get("scored"))),
        ("experiments", fmt_int(g.get("experiments"))),
        ("studies", fmt_int(g.get("studies"))),
        ("cells", fmt_int(g.get("cells"))),
        ("models", fmt_int(n_models)),
        ("transcripts rendered", fmt_int(len(ctx.transcripts))),
    ]
    facts: list[tuple[str, Any]] = [
        ("variants", g.get("variants")),
        ("prompt versions", g.get("prompt_versions")),
        ("games by outcome", outcome_counts_text(g)),
        ("first game landed", prov.get("first_landed")),
        ("last game landed", prov.get("last_landed")),
        ("code version (package)", prov.get("versions")),
        ("code version (git commit)", prov.get("commits") or "(not recorded)"),
    ]
    if ctx.build:
        facts.append(
            (
                "warehouse build",
                f"{ctx.build.get('build_id')} "
                f"(finished {ctx.build.get('finished_at')}, quality gate {ctx.build.get('status')})",
            )
        )
    outcome_rows = m.rows(
        """select study, case when not valid then 'invalid' when status = 'failed' then 'failed'
                              when status <> 'finished' or winner is null then 'unfinished'
                              when winner = 'mafia' then 'mafia won' else 'town won' end as outcome,
                  count(*) as games
           from fct_games group by all order by study, outcome"""
    )
    if outcome_rows:
        page.add_chart("outcomes", charts.outcomes_chart(outcome_rows), "Games per study by outcome.")
    study_rows = None
    if m.has("mart_win_rates"):
        study_rows = m.rows(
            """select value as study, variant, n, k, k_tie, laplace_mean, beta_sd, wilson_low, wilson_high,
                      n_fallback_decided, n_unfinished, n_invalid
               from mart_win_rates where dimension = 'study' and team = 'mafia' order by value, variant"""
        )
    page.data.update(
        has_games=True,
        tiles=tiles,
        facts=facts,
        cards=[p for p in registered() if p.path != page.path],
        study_rows=study_rows,
        notes=ctx.notes,
    )
    return page

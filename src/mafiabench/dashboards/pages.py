"""Page builders: each reads marts through `Marts` and returns a `Page` (HTML body, chart specs).

Sections whose mart is missing say so rather than failing the render: the dashboards still publish what exists.
Tables are capped for very large warehouses, and each cap is stated on the page.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mafiabench.dashboards import charts
from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import (
    ChartBlock,
    Column,
    Markup,
    Page,
    badge,
    esc,
    fmt_float,
    fmt_int,
    fmt_interval,
    fmt_pct,
    fmt_usd,
    link,
    stats,
    table,
)

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

# (path, navigation label, description on the index)
PAGES: list[tuple[str, str, str]] = [
    ("index.html", "Overview", "The study in numbers."),
    ("win-rates.html", "Win rates", "Win rates by experiment, prompt version, cell and model in each role."),
    ("capability-deceive.html", "Deceive", CAPABILITIES["deceive"][1]),
    ("capability-detect.html", "Detect", CAPABILITIES["detect"][1]),
    ("capability-disclose.html", "Disclose", CAPABILITIES["disclose"][1]),
    (
        "capability-scores.html",
        "Scores",
        "Aggregate capability scores: bottom-up z-scores and the top-down latent ability model, with intervals.",
    ),
    ("exceptional-games.html", "Exceptional games", "Games to read first, ranked by surprise, with the reason."),
    ("failures.html", "Failures", "Reasoning failures (Level 1 and 2) and format failures by model."),
    ("biases.html", "Biases", "Last-speaker advantage and name and seat bias."),
    ("costs.html", "Cost", "Tokens, money, calls and latency per model, per cell and per game."),
    ("data-quality.html", "Data quality", "The latest validation results, failures first."),
    ("transcripts/index.html", "Transcripts", "Every rendered game transcript."),
]

NAV = [(p, label) for p, label, _ in PAGES]


@dataclass
class Context:
    """What every page builder needs besides the marts."""

    marts: Marts
    baselines: list[dict[str, Any]]
    transcripts: dict[str, str]  # game_id -> path of its transcript page, relative to the dashboards root
    n_games: int = 0
    transcripts_note: str = ""
    max_rows: int = 500
    build: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def game_link(self, game_id: str, root: str = "") -> Markup:
        """A link to the game's transcript when it was rendered, else the id as text."""
        path = self.transcripts.get(game_id)
        return link(root + path, game_id) if path else esc(game_id)


def _missing(*names: str) -> Markup:
    return Markup(
        f'<p class="warn">Not available: the warehouse has no {esc(", ".join(names))} '
        "(run <code>mafiabench build</code> with a version that defines it).</p>"
    )


def _options(values: Iterable[Any]) -> list[Any]:
    return [v for v in dict.fromkeys(values) if v is not None]


def _rate_columns(*, k: str = "k", n: str = "n", k_tie: str | None = "k_tie", label: str = "wins") -> list[Column]:
    cols = [Column(label, lambda r: f"{fmt_int(r.get(k))} / {fmt_int(r.get(n))}", numeric=True)]
    if k_tie:
        cols.append(Column("after a tie-break", k_tie, numeric=True))
    cols += [
        Column(
            "Beta mean ± sd",
            lambda r: f"{fmt_pct(r.get('laplace_mean'))} ± {fmt_pct(r.get('beta_sd'))}",
            numeric=True,
            title="Laplace/Beta posterior mean (k+1)/(n+2) and sd of Beta(k+1, n-k+1)",
        ),
        Column("Wilson 95%", lambda r: fmt_interval(r.get("wilson_low"), r.get("wilson_high")), numeric=True),
    ]
    return cols


# -- index ---------------------------------------------------------------------------------------------------


def index_page(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("index.html", "Mafia benchmark: the study in numbers", Markup(""))
    parts: list[str] = []
    if not m.has("fct_games"):
        parts.append(_missing("fct_games"))
        page.body = Markup("".join(parts))
        return page
    g = m.one(
        """select count(*) as games, count(*) filter (where is_scored) as scored,
                  count(*) filter (where status = 'failed') as failed, count(*) filter (where not valid) as invalid,
                  count(*) filter (where status = 'unfinished') as unfinished,
                  count(distinct experiment) as experiments, count(distinct study) as studies,
                  count(distinct cell) as cells,
                  string_agg(distinct variant, ', ' order by variant) as variants,
                  string_agg(distinct prompt_version, ', ' order by prompt_version) as prompt_versions
           from fct_games"""
    )
    n_models = m.scalar("select count(*) from dim_models") if m.has("dim_models") else None
    prov_table = "fct_games" if {"landed_at", "package_version"} <= m.columns("fct_games") else "stg_games"
    prov: dict[str, Any] = {}
    if m.has(prov_table) and {"landed_at", "package_version", "git_commit"} <= m.columns(prov_table):
        prov = m.one(
            f"""select min(landed_at) as first_landed, max(landed_at) as last_landed,
                       string_agg(distinct package_version, ', ' order by package_version) as versions,
                       string_agg(distinct git_commit, ', ' order by git_commit) as commits
                from {prov_table}"""
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
    parts.append(stats(tiles))
    facts: list[dict[str, Any]] = [
        {"what": "variants", "value": g.get("variants")},
        {"what": "prompt versions", "value": g.get("prompt_versions")},
        {
            "what": "games failed / unfinished / invalid",
            "value": f"{fmt_int(g.get('failed'))} / {fmt_int(g.get('unfinished'))} / {fmt_int(g.get('invalid'))}",
        },
        {"what": "first game landed", "value": prov.get("first_landed")},
        {"what": "last game landed", "value": prov.get("last_landed")},
        {"what": "code version (package)", "value": prov.get("versions")},
        {"what": "code version (git commit)", "value": prov.get("commits") or "(not recorded)"},
    ]
    if ctx.build:
        facts.append(
            {
                "what": "warehouse build",
                "value": f"{ctx.build.get('build_id')} "
                f"(finished {ctx.build.get('finished_at')}, quality gate {ctx.build.get('status')})",
            }
        )
    parts.append(table(facts, [Column("", "what"), Column("", "value")], cls="facts", header=False))

    parts.append("<h2>Pages</h2><div class=cards>")
    for path, label, desc in PAGES[1:]:
        parts.append(f'<div class="card"><h3>{link(path, label)}</h3><p class="muted">{esc(desc)}</p></div>')
    parts.append("</div>")

    outcome_rows = m.rows(
        """select study, case when not valid then 'invalid' when status = 'failed' then 'failed'
                              when status <> 'finished' or winner is null then 'unfinished'
                              when winner = 'mafia' then 'mafia won' else 'town won' end as outcome,
                  count(*) as games
           from fct_games group by all order by study, outcome"""
    )
    parts.append("<h2>Games per study</h2>")
    if outcome_rows:
        page.charts.append(ChartBlock("outcomes", charts.outcomes_chart(outcome_rows), "Games per study by outcome."))
        parts.append(page.chart("outcomes"))
    else:
        parts.append('<p class="empty">No game has been landed yet.</p>')
    if m.has("mart_win_rates"):
        study_rows = m.rows(
            """select value as study, variant, n, k, k_tie, laplace_mean, beta_sd, wilson_low, wilson_high,
                      n_fallback_decided, n_unfinished, n_invalid
               from mart_win_rates where dimension = 'study' and team = 'mafia' order by value, variant"""
        )
        parts.append(
            table(
                study_rows,
                [
                    Column("study", "study"),
                    Column("variant", "variant"),
                    *_rate_columns(label="mafia wins / scored games"),
                    Column("decided by a fallback vote", "n_fallback_decided", numeric=True),
                    Column("unfinished", "n_unfinished", numeric=True),
                    Column("invalid", "n_invalid", numeric=True),
                ],
            )
        )
    if ctx.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{esc(n)}</li>" for n in ctx.notes) + "</ul>")
    page.body = Markup("".join(parts))
    return page


# -- win rates ---------------------------------------------------------------------------------------------------


def win_rates_page(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("win-rates.html", "Win rates", Markup(""))
    if not m.has("mart_win_rates"):
        page.body = _missing("mart_win_rates")
        return page
    rows = m.rows("select * from mart_win_rates where n > 0 order by variant, dimension, value")
    dims = _options(r["dimension"] for r in rows)
    variants = _options(r["variant"] for r in rows)
    parts = [
        '<p class="lead">Each bar is the observed win rate k/n of the team shown (mafia for game groupings; a '
        "model in a role counts its role's team), split into clean wins and wins decided by a random tie-break "
        "(lighter). Error bars: Wilson 95% interval or Beta posterior mean ± 1 sd (choose below the chart). "
        "Use the dropdowns to group by experiment, prompt version, cell or a model in each role.</p>"
    ]
    if rows:
        page.charts.append(
            ChartBlock(
                "win-rates",
                charts.win_rate_chart(rows, dimensions=dims, variants=variants),
                "Win rates by the chosen grouping.",
            )
        )
        parts.append(page.chart("win-rates"))
    shown = [r for r in rows if r["dimension"] in ("all", "experiment", "study", "prompt_version", "source")]
    parts.append("<h2>Overall, by experiment and prompt version</h2>")
    parts.append(
        table(
            shown,
            [
                Column("variant", "variant"),
                Column("grouping", "dimension"),
                Column("value", "value"),
                Column("team", "team"),
                *_rate_columns(),
                Column("decided by a fallback vote", "n_fallback_decided", numeric=True),
            ],
        )
    )
    page.body = Markup("".join(parts))
    return page


# -- capabilities ---------------------------------------------------------------------------------------------------


def _studies_by_size(m: Marts, table_name: str, study_col: str = "study") -> list[str]:
    rows = m.rows(f"select {study_col} as s, count(*) as c from {table_name} group by 1 order by 2 desc, 1")
    return [r["s"] for r in rows if r["s"] is not None]


def _night_modes(m: Marts) -> dict[str, list[str]]:
    if not (m.has("fct_games") and "night_mode" in m.columns("fct_games")):
        return {}
    rows = m.rows(
        "select distinct study, coalesce(night_mode, 'scripted') as night from fct_games where variant = 'mini-mafia'"
    )
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r["study"], []).append(r["night"])
    return out


def capability_page(ctx: Context, capability: str) -> Page:
    m = ctx.marts
    title, explanation = CAPABILITIES[capability]
    page = Page(f"capability-{capability}.html", f"{title}: win rate of each target model per background", Markup(""))
    if not m.has("mart_capability_win_rates"):
        page.body = _missing("mart_capability_win_rates")
        return page
    rows = m.rows(
        "select * from mart_capability_win_rates where capability = ? and n > 0 "
        "order by study, background, target_model",
        [capability],
    )
    metric = "mafia_win" if capability == "deceive" else "town_win"
    parts = [
        f'<p class="lead">{esc(explanation)} Bars: observed rate k/n, with the part decided by a random tie-break '
        "in a lighter shade. Error bars: Wilson 95% interval or Beta posterior mean ± 1 sd (switch below the "
        "chart). Dashed red lines: exact analytic baselines, what a player with no skill would get "
        f"({'mafia' if metric == 'mafia_win' else 'town'} win probability of scripted policies; only the "
        "profiles matching the study's night mode). Homogeneous games (one model in every role) appear in all "
        "three capabilities.</p>"
    ]
    if not rows:
        parts.append('<p class="empty">No Mini-Mafia games measure this capability yet.</p>')
        page.body = Markup("".join(parts))
        return page
    studies = [s for s in _studies_by_size(m, "mart_capability_win_rates") if any(r["study"] == s for r in rows)]
    spec = charts.capability_chart(
        rows, ctx.baselines, capability=capability, studies=studies, night_modes=_night_modes(m)
    )
    page.charts.append(ChartBlock(capability, spec, f"{title}: win rate per background (choose the study above)."))
    parts.append(page.chart(capability))
    parts.append("<h2>Exact baselines</h2>")
    parts.append(
        table(
            ctx.baselines,
            [
                Column("profile", "profile"),
                Column("night", "night"),
                Column("description", "description"),
                Column("town wins", lambda r: f"{r['town_win_fraction']} ({fmt_pct(r['town_win'])})", numeric=True),
                Column("mafia wins", lambda r: f"{r['mafia_win_fraction']} ({fmt_pct(r['mafia_win'])})", numeric=True),
                Column("town wins after a tie-break", lambda r: fmt_pct(r["town_win_after_tie"]), numeric=True),
            ],
        )
    )
    parts.append("<h2>All cells</h2>")
    parts.append(
        table(
            rows,
            [
                Column("study", "study"),
                Column("background", "background"),
                Column("target model", "target_model"),
                Column("homogeneous", "is_homogeneous"),
                *_rate_columns(),
                Column("unscored games", "n_unscored", numeric=True),
            ],
        )
    )
    page.body = Markup("".join(parts))
    return page


LATENT_LABELS = {
    "deceive": "deceive: a (as mafioso)",
    "disclose": "disclose: b (as detective)",
    "detect": "detect: ln c (as villager)",
}


def _plot_scale(r: dict[str, Any]) -> None:
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


def scores_page(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("capability-scores.html", "Aggregate capability scores", Markup(""))
    parts: list[str] = ["<h2>Bottom-up scores</h2>"]
    if m.has("mart_capability_scores"):
        rows = m.rows("select * from mart_capability_scores order by study, capability, target_model")
        parts.append(
            '<p class="lead">Per background, each target\'s Beta posterior mean is z-scored against the other '
            "targets of that background; z is averaged over backgrounds and the score is exp(mean z) (1 = an "
            "average target). Intervals: the posterior sd propagated by the delta method, 95%.</p>"
        )
        if rows:
            studies = _studies_by_size(m, "mart_capability_scores")
            page.charts.append(
                ChartBlock(
                    "bottom-up",
                    charts.scores_chart(rows, studies=studies),
                    "Bottom-up scores with 95% intervals (log scale).",
                )
            )
            parts.append(page.chart("bottom-up"))
        parts.append(
            table(
                rows,
                [
                    Column("study", "study"),
                    Column("capability", "capability"),
                    Column("target model", "target_model"),
                    Column("score", lambda r: fmt_float(r.get("score")), numeric=True),
                    Column(
                        "95% interval",
                        lambda r: fmt_interval(r.get("score_low"), r.get("score_high"), pct=False),
                        numeric=True,
                    ),
                    Column(
                        "mean z ± sd",
                        lambda r: f"{fmt_float(r.get('mean_z'))} ± {fmt_float(r.get('mean_z_sd'))}",
                        numeric=True,
                    ),
                    Column("backgrounds", "n_backgrounds", numeric=True),
                    Column("games", "n_games", numeric=True),
                ],
                empty="No capability has at least two targets in one background yet.",
            )
        )
    else:
        parts.append(_missing("mart_capability_scores"))
    parts.append("<h2>Top-down latent ability model</h2>")
    if m.has("mart_latent_abilities"):
        parts.append(
            '<p class="lead">logit P(mafia wins | mafioso i, detective j, villager k) = c<sub>k</sub> '
            "(a<sub>i</sub> − b<sub>j</sub>): a = deceive, b = disclose (logit scale, centred), c = detect "
            "(a multiplier, geometric mean 1; plotted as ln c so 0 is average everywhere). Maximum likelihood with "
            "Laplace 95% intervals; the table gives c itself.</p>"
        )
        rows = m.rows("select * from mart_latent_abilities order by study, ability, model")
        for r in rows:
            _plot_scale(r)
        if rows:
            studies = _studies_by_size(m, "mart_latent_abilities")
            page.charts.append(
                ChartBlock(
                    "top-down",
                    charts.latent_chart(rows, studies=studies),
                    "Latent abilities with Laplace 95% intervals.",
                )
            )
            parts.append(page.chart("top-down"))
        parts.append(
            table(
                rows,
                [
                    Column("study", "study"),
                    Column("ability", "ability"),
                    Column("model", "model"),
                    Column("parameter", "parameter"),
                    Column(
                        "estimate ± se",
                        lambda r: f"{fmt_float(r.get('estimate'))} ± {fmt_float(r.get('se'))}",
                        numeric=True,
                    ),
                    Column(
                        "95% interval",
                        lambda r: fmt_interval(r.get("ci_low"), r.get("ci_high"), pct=False),
                        numeric=True,
                    ),
                    Column("games in role", "n_games", numeric=True),
                ],
                empty="No study had enough Mini-Mafia games to fit the latent model.",
            )
        )
    else:
        parts.append(_missing("mart_latent_abilities"))
    if m.has("mart_latent_fit"):
        fits = m.rows("select * from mart_latent_fit order by study")
        parts.append("<h3>Fit and predictive gain (Brier score, 5-fold cross-validation)</h3>")
        parts.append(
            table(
                fits,
                [
                    Column("study", "study"),
                    Column("games", "n_games", numeric=True),
                    Column("cells", "n_cells", numeric=True),
                    Column("converged", "converged"),
                    Column("log-likelihood", lambda r: fmt_float(r.get("log_likelihood"), 2), numeric=True),
                    Column("Brier (model)", lambda r: fmt_float(r.get("brier_model"), 4), numeric=True),
                    Column("Brier (constant rate)", lambda r: fmt_float(r.get("brier_constant"), 4), numeric=True),
                    Column(
                        "gain",
                        lambda r: fmt_float(r.get("brier_gain"), 4),
                        numeric=True,
                        title="Brier(constant) − Brier(model): positive = the model predicts better",
                    ),
                    Column("skill", lambda r: fmt_float(r.get("brier_skill"), 3), numeric=True),
                ],
            )
        )
    page.body = Markup("".join(parts))
    return page


# -- exceptional games ---------------------------------------------------------------------------------------------


RULE_TEXT = {
    "upset": "the outcome's probability under its cell's rate (this game left out) is at most the threshold",
    "detective_revealed_town_lost": "the detective named the mafioso in public and the town still lost",
    "unanimous_wrong_vote": "every vote went to a town player",
    "fallback_decided": "a random fallback vote (after a format failure) decided the game",
    "vote_reversal": "a player switched votes between consecutive days",
    "rare_level1_failure": "a Level-1 failure by a model that almost never fails it",
    "rare_level2_failure": "a Level-2 failure by a model that almost never fails it",
}


def exceptional_ids(m: Marts, limit: int) -> list[str]:
    """The games the exceptional page links (its top rows); their transcripts must be rendered."""
    if not m.has("mart_exceptional_games"):
        return []
    rows = m.rows("select game_id from mart_exceptional_games order by surprise desc, game_id, rule limit ?", [limit])
    return list(dict.fromkeys(r["game_id"] for r in rows))


def exceptional_page(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("exceptional-games.html", "Exceptional games", Markup(""))
    if not m.has("mart_exceptional_games"):
        page.body = _missing("mart_exceptional_games")
        return page
    total = m.scalar("select count(*) from mart_exceptional_games") or 0
    rows = m.rows("select * from mart_exceptional_games order by surprise desc, game_id, rule limit ?", [ctx.max_rows])
    by_rule = m.rows(
        "select rule, count(*) as flags, count(distinct game_id) as games, max(surprise) as max_surprise "
        "from mart_exceptional_games group by rule order by flags desc"
    )
    parts = [
        '<p class="lead">Games a researcher should read first. Surprise = −ln p, where p is the probability of what '
        "happened: for an upset, the outcome's probability under its cell's Laplace rate with the game itself left "
        "out; for a pattern, how rare the pattern is among the variant's games; for a rare failure, the model's "
        "failure rate. Every game id links to its transcript; click a point in the chart to open it.</p>"
    ]
    for r in by_rule:
        r["meaning"] = RULE_TEXT.get(r["rule"], "")
    parts.append(
        table(
            by_rule,
            [
                Column("rule", "rule"),
                Column("meaning", "meaning"),
                Column("flags", "flags", numeric=True),
                Column("games", "games", numeric=True),
                Column("max surprise", lambda r: fmt_float(r.get("max_surprise"), 2), numeric=True),
            ],
            empty="No game was flagged.",
        )
    )
    top = rows[:40]
    chart_rows = [{**r, "href": ctx.transcripts.get(r["game_id"])} for r in top]
    if chart_rows:
        page.charts.append(
            ChartBlock(
                "surprise",
                charts.surprise_chart(chart_rows),
                f"The {len(chart_rows)} most surprising flags (click to read the game).",
            )
        )
        parts.append(page.chart("surprise"))
    if total > len(rows):
        parts.append(f'<p class="note">Showing the {len(rows):,} most surprising of {total:,} flags.</p>')
    for i, r in enumerate(rows, start=1):
        r["rank"] = i
    parts.append(
        table(
            rows,
            [
                Column("#", "rank", numeric=True),
                Column("game", lambda r: Markup(f'<span class="game">{ctx.game_link(r["game_id"])}</span>')),
                Column("rule", "rule"),
                Column("surprise", lambda r: fmt_float(r.get("surprise"), 2), numeric=True),
                Column(
                    "p", lambda r: f"{r['probability']:.3g}" if r.get("probability") is not None else "–", numeric=True
                ),
                Column("study", "study"),
                Column("cell", "cell"),
                Column("reason", "reason"),
            ],
            cls="exceptional",
            empty="No game was flagged.",
        )
    )
    page.body = Markup("".join(parts))
    return page


# -- failures -------------------------------------------------------------------------------------------------------


def failures_page(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("failures.html", "Reasoning and format failures", Markup(""))
    parts: list[str] = ["<h2>Reasoning failures</h2>"]
    if m.has("mart_reasoning_failures"):
        parts.append(
            '<p class="lead">Level 1: the detective, who knows the mafioso, does not vote for it (rate per '
            "detective model). Level 2: the mafioso does not vote for the detective after the detective accused it "
            "(rate per mafioso model). Points: Beta posterior mean; bars: Wilson 95% interval.</p>"
        )
        rows = m.rows("select * from mart_reasoning_failures order by variant, level, model")
        for r in rows:
            r["n"], r["k"] = r.get("n_opportunities"), r.get("n_failures")
            r["level_label"] = f"Level {r['level']} ({r.get('role') or ''})"
        if rows:
            variants = _options(r["variant"] for r in rows)
            page.charts.append(
                ChartBlock(
                    "reasoning", charts.reasoning_chart(rows, variants=variants), "Reasoning-failure rate per model."
                )
            )
            parts.append(page.chart("reasoning"))
        parts.append(
            table(
                rows,
                [
                    Column("variant", "variant"),
                    Column("level", "level", numeric=True),
                    Column("model", "model"),
                    Column("role", "role"),
                    *_rate_columns(k_tie=None, label="failures / chances"),
                    Column("failures by a random fallback", "n_failures_by_fallback", numeric=True),
                    Column("games", "n_games", numeric=True),
                ],
                empty="No Level-1 or Level-2 opportunity in the data.",
            )
        )
    else:
        parts.append(_missing("mart_reasoning_failures"))
    parts.append("<h2>Format failures</h2>")
    if m.has("mart_format_failures"):
        parts.append(
            '<p class="lead">Answers that broke the response format, by model, role and action. A failed message '
            "became a public silence, a failed vote or night choice a uniformly random valid choice (flagged in "
            "the transcripts).</p>"
        )
        rows = m.rows("select * from mart_format_failures order by variant, model, role, action")
        for r in rows:
            r["n"], r["k"] = r.get("n_decisions"), r.get("n_format_failures")
        if rows:
            variants = _options(r["variant"] for r in rows)
            page.charts.append(
                ChartBlock(
                    "format",
                    charts.format_failure_chart(rows, variants=variants),
                    "Format-failure rate per model, by action and role.",
                )
            )
            parts.append(page.chart("format"))
        parts.append(
            table(
                rows,
                [
                    Column("variant", "variant"),
                    Column("model", "model"),
                    Column("role", "role"),
                    Column("action", "action"),
                    *_rate_columns(k_tie=None, label="failures / decisions"),
                ],
                empty="No decisions recorded.",
            )
        )
    else:
        parts.append(_missing("mart_format_failures"))
    parts.append("<h2>Outcomes decided by a random fallback vote</h2>")
    if m.has("mart_win_rates"):
        rows = m.rows(
            "select * from mart_win_rates where dimension = 'cell' and team = 'mafia' and n > 0 order by variant, value"
        )
        overall = m.rows(
            "select variant, n, n_fallback_decided, share_fallback_decided from mart_win_rates "
            "where dimension = 'all' and team = 'mafia' order by variant"
        )
        parts.append(
            table(
                overall,
                [
                    Column("variant", "variant"),
                    Column("scored games", "n", numeric=True),
                    Column("decided by a fallback vote", "n_fallback_decided", numeric=True),
                    Column("share", lambda r: fmt_pct(r.get("share_fallback_decided")), numeric=True),
                ],
            )
        )
        if rows:
            variants = _options(r["variant"] for r in rows)
            page.charts.append(
                ChartBlock(
                    "fallback",
                    charts.fallback_share_chart(rows, variants=variants),
                    "Share of each cell's games whose deciding vote needed a random fallback.",
                )
            )
            parts.append(page.chart("fallback"))
    else:
        parts.append(_missing("mart_win_rates"))
    page.body = Markup("".join(parts))
    return page


# -- biases ---------------------------------------------------------------------------------------------------------


def _with_rate(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in rows:
        n = r.get("n") or 0
        r["rate"] = (r.get("k") or 0) / n if n else None
    return rows


def biases_page(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("biases.html", "Last-speaker and name bias", Markup(""))
    parts: list[str] = ["<h2>Last-speaker advantage</h2>"]
    if m.has("mart_last_speaker_bias"):
        parts.append(
            '<p class="lead">Win rate of each role\'s team when that player had the last turn of the final '
            "discussion round, against when it did not (games with a discussion only).</p>"
        )
        rows = _with_rate(m.rows("select * from mart_last_speaker_bias order by variant, role, spoke_last"))
        for r in rows:
            r["spoke_last"] = "spoke last" if r.get("spoke_last") else "did not speak last"
        if rows:
            variants = _options(r["variant"] for r in rows)
            page.charts.append(
                ChartBlock(
                    "last-speaker",
                    charts.last_speaker_chart(rows, variants=variants),
                    "Win rate by role, last speaker or not.",
                )
            )
            parts.append(page.chart("last-speaker"))
        parts.append(
            table(
                rows,
                [
                    Column("variant", "variant"),
                    Column("role", "role"),
                    Column("last speaker", "spoke_last"),
                    *_rate_columns(),
                    Column(
                        "advantage ± sd",
                        lambda r: (
                            f"{fmt_pct(r['advantage'])} ± {fmt_pct(r.get('advantage_sd'))}"
                            if r.get("advantage") is not None
                            else ""
                        ),
                        numeric=True,
                    ),
                ],
                empty="No game had a discussion.",
            )
        )
    else:
        parts.append(_missing("mart_last_speaker_bias"))
    parts.append("<h2>Name and seat bias</h2>")
    if m.has("mart_name_seat_bias"):
        parts.append(
            '<p class="lead">Win rate of a player\'s team by the name it was given and by its seat, over all games '
            "and in the no-communication setting (where nothing but the name can matter).</p>"
        )
        rows = _with_rate(
            m.rows(
                "select * from mart_name_seat_bias order by variant, setting, dimension, role, "
                "try_cast(value as integer), value"
            )
        )
        if rows:
            variants = _options(r["variant"] for r in rows)
            settings = _options(["all", *(r["setting"] for r in rows)])
            roles = _options(["all", *(r["role"] for r in rows)])
            page.charts.append(
                ChartBlock(
                    "name-seat",
                    charts.name_seat_chart(rows, variants=variants, settings=settings, roles=roles),
                    "Win rate by name and by seat (choose the setting and role above).",
                )
            )
            parts.append(page.chart("name-seat"))
        shown = [r for r in rows if r.get("role") == "all"]
        parts.append(
            table(
                shown,
                [
                    Column("variant", "variant"),
                    Column("setting", "setting"),
                    Column("by", "dimension"),
                    Column("value", "value"),
                    *_rate_columns(),
                ],
                empty="No scored games.",
            )
        )
    else:
        parts.append(_missing("mart_name_seat_bias"))
    page.body = Markup("".join(parts))
    return page


# -- cost ---------------------------------------------------------------------------------------------------------


def costly_ids(m: Marts, limit: int = 20) -> list[str]:
    if not m.has("mart_game_costs"):
        return []
    rows = m.rows(
        "select game_id from mart_game_costs order by coalesce(cost_usd, 0) desc, total_tokens desc, game_id limit ?",
        [limit],
    )
    return [r["game_id"] for r in rows]


UNPRICED = "Some models have no price: their cost counts as unknown (0 here)."


def costs_page(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("costs.html", "Cost and tokens", Markup(""))
    parts: list[str] = []
    if not m.has("mart_cell_costs"):
        page.body = _missing("mart_cell_costs")
        return page
    totals = m.one(
        """select sum(n_calls) as calls, sum(n_failed_calls) as failed, sum(n_retried_calls) as retried,
                  sum(input_tokens) as input_tokens, sum(output_tokens) as output_tokens,
                  sum(cached_tokens) as cached_tokens, sum(cost_usd) as cost, bool_and(fully_priced) as priced,
                  string_agg(distinct price_version, ', ') as price_versions
           from mart_cell_costs"""
    )
    parts.append(
        stats(
            [
                ("model calls", fmt_int(totals.get("calls"))),
                ("failed calls", fmt_int(totals.get("failed"))),
                ("retried calls", fmt_int(totals.get("retried"))),
                ("input tokens", fmt_int(totals.get("input_tokens"))),
                ("cached input tokens", fmt_int(totals.get("cached_tokens"))),
                ("output tokens", fmt_int(totals.get("output_tokens"))),
                ("cost (US$)", fmt_usd(totals.get("cost"))),
            ]
        )
    )
    parts.append(
        f'<p class="note">Prices from the versioned price table in the repository '
        f"(version {esc(totals.get('price_versions') or 'none')}), never fetched. "
        f"{'' if totals.get('priced') in (True, None) else UNPRICED}"
        "</p>"
    )
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
    parts.append("<h2>Per model</h2>")
    if per_model:
        page.charts.append(ChartBlock("tokens", charts.model_tokens_chart(per_model), "Tokens per game by model."))
        parts.append(page.chart("tokens"))
        page.charts.append(ChartBlock("cost", charts.model_cost_chart(per_model), "Money per game by model."))
        parts.append(page.chart("cost"))
    parts.append(
        table(
            per_model,
            [
                Column("model", "model"),
                Column("games", "n_games", numeric=True),
                Column("calls", "n_calls", numeric=True),
                Column("failed calls", "n_failed_calls", numeric=True),
                Column("retried calls", "n_retried_calls", numeric=True),
                Column("input tokens", lambda r: fmt_int(r.get("input_tokens")), numeric=True),
                Column("cached", lambda r: fmt_int(r.get("cached_tokens")), numeric=True),
                Column("output tokens", lambda r: fmt_int(r.get("output_tokens")), numeric=True),
                Column("tokens per game", lambda r: fmt_int(r.get("tokens_per_game")), numeric=True),
                Column("US$", lambda r: fmt_usd(r.get("cost_usd")), numeric=True),
                Column("US$ per game", lambda r: fmt_usd(r.get("cost_usd_per_game")), numeric=True),
                Column("priced", "fully_priced"),
            ],
            empty="No model calls (scripted policies only).",
        )
    )
    parts.append("<h2>Per cell and model</h2>")
    cells = m.rows("select * from mart_cell_costs order by study, cell, provider, model limit ?", [ctx.max_rows])
    parts.append(
        table(
            cells,
            [
                Column("study", "study"),
                Column("cell", "cell"),
                Column("model", lambda r: f"{r['provider']}/{r['model']}"),
                Column("games", "n_games", numeric=True),
                Column("calls", "n_calls", numeric=True),
                Column("failed", "n_failed_calls", numeric=True),
                Column("retried", "n_retried_calls", numeric=True),
                Column("tokens per game", lambda r: fmt_int(r.get("tokens_per_game")), numeric=True),
                Column("US$ per game", lambda r: fmt_usd(r.get("cost_usd_per_game")), numeric=True),
                Column(
                    "latency p50 / p95 (ms)",
                    lambda r: f"{fmt_int(r.get('latency_ms_p50'))} / {fmt_int(r.get('latency_ms_p95'))}",
                    numeric=True,
                ),
                Column(
                    "prompt prefix reuse",
                    lambda r: fmt_pct(r.get("prefix_reuse_share")),
                    numeric=True,
                    title="share of prompt characters that repeat the same player's previous prompt",
                ),
            ],
            empty="No model calls.",
        )
    )
    if m.has("mart_game_costs"):
        parts.append("<h2>Per game</h2>")
        hist = _histogram(m, "mart_game_costs", "total_tokens")
        if hist:
            page.charts.append(
                ChartBlock(
                    "game-tokens",
                    charts.histogram_chart(hist, x_title="tokens per game"),
                    "Distribution of tokens per game (games with model calls).",
                )
            )
            parts.append(page.chart("game-tokens"))
        top = m.rows(
            "select * from mart_game_costs order by coalesce(cost_usd, 0) desc, total_tokens desc, game_id limit 20"
        )
        parts.append("<h3>The most expensive games</h3>")
        parts.append(
            table(
                top,
                [
                    Column("game", lambda r: ctx.game_link(r["game_id"])),
                    Column("calls", "n_calls", numeric=True),
                    Column("failed", "n_failed_calls", numeric=True),
                    Column("attempts", "n_attempts", numeric=True),
                    Column("format failures", "n_format_failures", numeric=True),
                    Column("tokens", lambda r: fmt_int(r.get("total_tokens")), numeric=True),
                    Column("US$", lambda r: fmt_usd(r.get("cost_usd")), numeric=True),
                    Column(
                        "model time (s)", lambda r: fmt_float((r.get("latency_ms_total") or 0) / 1000, 1), numeric=True
                    ),
                    Column("prefix reuse", lambda r: fmt_pct(r.get("prefix_reuse_share")), numeric=True),
                ],
            )
        )
    page.body = Markup("".join(parts))
    return page


def _histogram(m: Marts, table_name: str, column: str, bins: int = 30) -> list[dict[str, Any]]:
    """Equal-width bins computed in SQL, so a million games stay a few dozen points."""
    return m.rows(
        f"""with s as (select min({column}) as lo, max({column}) as hi from {table_name}),
                w as (select lo, greatest((hi - lo) / {bins}.0, 1.0) as width from s),
                b as (select least(floor(({column} - w.lo) / w.width), {bins - 1}) as i, w.lo, w.width
                      from {table_name}, w where {column} is not null)
            select lo + i * width as lo, lo + (i + 1) * width as hi, count(*) as games
            from b group by i, lo, width order by i"""
    )


# -- data quality ------------------------------------------------------------------------------------------------


def quality_page(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("data-quality.html", "Data quality", Markup(""))
    if not m.has("validation_results"):
        page.body = _missing("validation_results")
        return page
    build_id = (ctx.build or {}).get("build_id") or m.scalar(
        "select build_id from validation_results order by run_at desc limit 1"
    )
    rows = m.rows(
        "select * from validation_results where build_id = ? order by success, suite, expectation, rule", [build_id]
    )
    n_failed = sum(1 for r in rows if not r.get("success"))
    parts = [
        f'<p class="lead">Validation results of build {esc(build_id)} (run {esc(rows[0]["run_at"] if rows else "")}): '
        f"{len(rows) - n_failed} of {len(rows)} expectations passed. Great Expectations suites on raw tables and "
        "marts, plus the SQL assertions under <code>sql/tests/</code>. Failures come first; a failure blocks "
        "publishing, so dashboards are only rendered from a build that passed.</p>"
    ]
    per_suite: dict[tuple[str, str], int] = {}
    for r in rows:
        key = (r["suite"], "passed" if r.get("success") else "failed")
        per_suite[key] = per_suite.get(key, 0) + 1
    failed_suites = {s for (s, o) in per_suite if o == "failed"}
    chart_rows = [
        {"suite": s, "outcome": o, "expectations": c, "failed_first": 0 if s in failed_suites else 1}
        for (s, o), c in sorted(per_suite.items())
    ]
    if chart_rows:
        page.charts.append(
            ChartBlock("validation", charts.validation_chart(chart_rows), "Expectations per suite, passed and failed.")
        )
        parts.append(page.chart("validation"))

    def outcome(r: Mapping[str, Any]) -> Markup:
        return badge("passed", "good") if r.get("success") else badge("FAILED", "bad")

    def failing(r: Mapping[str, Any]) -> Markup:
        sample = _pretty_json(r.get("failing_rows_json"))
        return Markup(f'<pre class="json">{esc(sample)}</pre>') if sample else Markup("")

    parts.append(
        table(
            rows,
            [
                Column("outcome", outcome),
                Column("suite", "suite"),
                Column("expectation", "expectation"),
                Column("rule", "rule"),
                Column("arguments", lambda r: _pretty_json(r.get("kwargs_json"), indent=None)),
                Column(
                    "unexpected / rows",
                    lambda r: f"{fmt_int(r.get('unexpected_count'))} / {fmt_int(r.get('element_count'))}",
                    numeric=True,
                ),
                Column("failing rows (sample)", failing),
            ],
            row_class=lambda r: "passed" if r.get("success") else "failed",
            empty="No validation results stored for this build.",
        )
    )
    if m.has("build_runs"):
        builds = m.rows("select * from build_runs order by started_at desc limit 20")
        parts.append("<h2>Recent builds</h2>")
        parts.append(
            table(
                builds,
                [
                    Column("build", "build_id"),
                    Column("started", "started_at"),
                    Column("status", "status"),
                    Column("published", "published"),
                    Column("models", "n_models", numeric=True),
                    Column("expectations", "n_expectations", numeric=True),
                    Column("failed", "n_failed", numeric=True),
                    Column("games", "n_games", numeric=True),
                    Column(
                        "message",
                        lambda r: Markup(f'<pre class="json">{esc(r["message"])}</pre>') if r.get("message") else "",
                    ),
                ],
                row_class=lambda r: "failed" if r.get("status") == "failed" else None,
            )
        )
    page.body = Markup("".join(parts))
    return page


def _pretty_json(text: Any, indent: int | None = 1) -> str:
    if not text:
        return ""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return str(text)
    if value in ([], {}, None):
        return ""
    return json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=True, default=str)


# -- the list of transcripts ---------------------------------------------------------------------------------------


def transcripts_index_page(ctx: Context, rows: Sequence[dict[str, Any]]) -> Page:
    page = Page("transcripts/index.html", "Game transcripts", Markup(""))
    root = page.root
    parts = [f'<p class="lead">{esc(ctx.transcripts_note)}</p>']
    parts.append(
        table(
            list(rows),
            [
                Column("game", lambda r: ctx.game_link(r["game_id"], root)),
                Column("study", "study"),
                Column("cell", "cell"),
                Column("variant", "variant"),
                Column("status", "status"),
                Column("winner", "winner"),
                Column("tie-break", "tie_decided"),
                Column("fallback decided", "fallback_decided"),
                Column("format failures", "n_format_failures", numeric=True),
            ],
            empty="No transcripts rendered.",
        )
    )
    page.body = Markup("".join(parts))
    return page


PageBuilder = Callable[[Context], Page]


def overview_builders() -> list[PageBuilder]:
    return [
        index_page,
        win_rates_page,
        *(lambda ctx, c=c: capability_page(ctx, c) for c in CAPABILITIES),  # type: ignore[misc]
        scores_page,
        exceptional_page,
        failures_page,
        biases_page,
        costs_page,
        quality_page,
    ]

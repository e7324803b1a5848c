"""Last-speaker advantage and name and seat bias (`mart_last_speaker_bias`, `mart_name_seat_bias`), one section per
study: a warehouse holds several (the published Mini-Mafia study beside a new run) and each is read on its own."""

from __future__ import annotations

from typing import Any

from mafiabench.dashboards import charts
from mafiabench.dashboards.data import Marts, options
from mafiabench.dashboards.html import Page, study_slug
from mafiabench.dashboards.page_registry import Context, register


def with_rate(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in rows:
        n = r.get("n") or 0
        r["rate"] = (r.get("k") or 0) / n if n else None
    return rows



def study_section(page: Page, study: str, name: str, last: list[dict[str, Any]] | None,
                  name_seat: list[dict[str, Any]] | None,
                  games: dict[tuple[str, str, str, bool], dict[str, Any]] | None = None) -> dict[str, Any]:
    """One study's charts, tables and CSV exports (the mart's rows of the study, exported before they are labelled
    for display)."""
    section: dict[str, Any] = {"study": study, "anchor": f"study-{name}", "last": None, "name_seat": None,
                               "last_chart": None, "last_export": None, "name_seat_chart": None,
                               "name_seat_export": None, "shared": []}
    if last is not None:
        rows = [r for r in last if r["study"] == study]
        if rows:
            page.add_export(f"{name}.last-speaker", rows)
            section["last_export"] = f"{name}.last-speaker"
            for r in rows:  # the rows whose games hold several of their players (`BY_GAME_SQL`)
                g = (games or {}).get((r["study"], r["variant"], r["role"], bool(r["spoke_last"])))
                if g is not None and g["players"] > g["games"]:
                    section["shared"].append({"variant": r["variant"], "role": r["role"],
                                              "spoke_last": bool(r["spoke_last"]), "players": g["players"],
                                              "games": g["games"], "beta_sd": r["beta_sd"],
                                              "sd_by_game": g["sd_by_game"]})
            with_rate(rows)
            for r in rows:
                r["spoke_last"] = "spoke last" if r.get("spoke_last") else "did not speak last"
            section["last_chart"] = f"last-speaker-{name}"
            page.add_chart(
                section["last_chart"],
                charts.last_speaker_chart(rows, variants=options(r["variant"] for r in rows)),
                f"Win rate by role, last speaker or not (study {study}).",
            )
        section["last"] = rows
    if name_seat is not None:
        rows = [r for r in name_seat if r["study"] == study]
        if rows:
            page.add_export(f"{name}.name-seat", rows)
            section["name_seat_export"] = f"{name}.name-seat"
            with_rate(rows)
            section["name_seat_chart"] = f"name-seat-{name}"
            page.add_chart(
                section["name_seat_chart"],
                charts.name_seat_chart(
                    rows,
                    variants=options(r["variant"] for r in rows),
                    settings=options(["all", *(r["setting"] for r in rows)]),
                    roles=options(["all", *(r["role"] for r in rows)]),
                ),
                f"Win rate by name and by seat (study {study}; choose the setting and role above).",
            )
        section["name_seat"] = [r for r in rows if r.get("role") == "all"]
    return section


# The last speaker's rows count players (the Mini-Mafia paper's unit: there each role has one player a game in the
# final discussion). In other variants several players of a role share a discussion and their team's outcome: their
# rate's sd with the game as the unit (the cluster-robust sd of a ratio, G / (G - 1) * sum_g (k_g - p m_g)^2 / N^2),
# which the page sets beside the players' Beta sd. Only those variants' players are read.
BY_GAME_SQL = """
with players as (
    select study, variant, role, spoke_last, game_id, won::int as won
    from fct_player_games
    where variant <> 'mini-mafia' and is_scored and had_discussion and active_in_final_discussion
),
per_game as (
    select study, variant, coalesce(role, 'all') as role, spoke_last, game_id, count(*) as m, sum(won) as k
    from players
    group by grouping sets ((study, variant, role, spoke_last, game_id), (study, variant, spoke_last, game_id))
),
sums as (
    select study, variant, role, spoke_last, count(*) as g, sum(m) as n, sum(k) as w, sum(k * k) as kk,
           sum(k * m) as km, sum(m * m) as mm
    from per_game
    group by all
)
select study, variant, role, spoke_last, g as games, n as players,
       case when g > 1 then sqrt(greatest(g / (g - 1.0) * (kk - 2 * (w / n) * km + (w / n) * (w / n) * mm), 0)) / n
       end as sd_by_game
from sums
"""


def by_game(m: Marts) -> dict[tuple[str, str, str, bool], dict[str, Any]]:
    """(study, variant, role, spoke_last) -> games, players and the sd by game, for the variants that can hold
    several players of a role in one final discussion."""
    if not m.has("fct_player_games"):
        return {}
    return {(r["study"], r["variant"], r["role"], bool(r["spoke_last"])): r for r in m.rows(BY_GAME_SQL)}


@register("biases.html", "Biases", "Last-speaker advantage and name and seat bias, per study.", order=60)
def build(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("biases.html", "Last-speaker and name bias", "bias.html.j2")
    last = name_seat = None
    games: dict[tuple[str, str, str, bool], dict[str, Any]] = {}
    if m.has("mart_last_speaker_bias"):
        last = m.rows("select * from mart_last_speaker_bias order by study, variant, role, spoke_last")
        games = by_game(m) if any(r["variant"] != "mini-mafia" for r in last) else {}
    if m.has("mart_name_seat_bias"):
        name_seat = m.rows(
            "select * from mart_name_seat_bias order by study, variant, setting, dimension, role, "
            "try_cast(value as integer), value"
        )
    taken: set[str] = set()
    studies = [
        study_section(page, study, study_slug(study, taken), last, name_seat, games)
        for study in sorted({r["study"] for r in [*(last or []), *(name_seat or [])]})
    ]
    page.data.update(last=last, name_seat=name_seat, studies=studies)
    return page

"""Last-speaker advantage and name and seat bias (`mart_last_speaker_bias`, `mart_name_seat_bias`), one section per
study: a warehouse holds several (the published Mini-Mafia study beside a new run) and each is read on its own."""

from __future__ import annotations

from typing import Any

from mafiabench.dashboards import charts
from mafiabench.dashboards.data import options
from mafiabench.dashboards.html import Page, study_slug
from mafiabench.dashboards.page_registry import Context, register


def with_rate(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in rows:
        n = r.get("n") or 0
        r["rate"] = (r.get("k") or 0) / n if n else None
    return rows


def wider(players: float | None, by_game: float | None) -> float | None:
    """Our contrast's sd: the wider of the players' (Beta sds: never 0, so it holds a few games that all went one
    way) and the game's (cluster-robust: it holds when a game holds several of the players compared, which the
    players' does not). The paper's contrast keeps the paper's unit."""
    known = [x for x in (players, by_game) if x is not None]
    return max(known) if known else None


def shared_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of the roles some of whose games hold several of a row's players (n > games: classic games'
    villagers, the rest of role `all` but the last speaker), both of a role's rows, with the sds the mart gives with
    the game as the unit beside the players' (before the rows are labelled for display)."""
    roles = {(r["variant"], r["role"]) for r in rows if r.get("games") is not None and r["n"] > r["games"]}
    return [{"variant": r["variant"], "role": r["role"], "spoke_last": bool(r["spoke_last"]), "players": r["n"],
             "games": r["games"], "beta_sd": r["beta_sd"], "sd_by_game": r["sd_by_game"],
             "advantage_sd": r["advantage_sd"], "advantage_sd_by_game": r["advantage_sd_by_game"]}
            for r in rows if (r["variant"], r["role"]) in roles]


def study_section(page: Page, study: str, name: str, last: list[dict[str, Any]] | None,
                  name_seat: list[dict[str, Any]] | None) -> dict[str, Any]:
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
            section["shared"] = shared_rows(rows)
            with_rate(rows)
            for r in rows:
                r["spoke_last"] = "spoke last" if r.get("spoke_last") else "did not speak last"
                r["ours_sd"] = wider(r.get("advantage_sd"), r.get("advantage_sd_by_game"))
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


@register("biases.html", "Biases", "Last-speaker advantage and name and seat bias, per study.", order=60)
def build(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("biases.html", "Last-speaker and name bias", "bias.html.j2")
    last = name_seat = None
    if m.has("mart_last_speaker_bias"):
        last = m.rows("select * from mart_last_speaker_bias order by study, variant, role, spoke_last")
    if m.has("mart_name_seat_bias"):
        name_seat = m.rows(
            "select * from mart_name_seat_bias order by study, variant, setting, dimension, role, "
            "try_cast(value as integer), value"
        )
    taken: set[str] = set()
    studies = [
        study_section(page, study, study_slug(study, taken), last, name_seat)
        for study in sorted({r["study"] for r in [*(last or []), *(name_seat or [])]})
    ]
    page.data.update(last=last, name_seat=name_seat, studies=studies)
    return page

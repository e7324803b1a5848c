"""Statement labels (`[statements]`, WOLF's self and peer assessments): a model's lies and catches at a glance, each
figure linked to its statements in the transcripts (`mart_statement_rates`, `mart_statement_detection`,
`mart_statement_lenses`, `mart_statement_labels`). Every bar and point links to the list of its statements below the
figures; every statement links to its line in the game's transcript, where each message shows its labels."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mafiabench.dashboards import charts
from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import Page
from mafiabench.dashboards.page_registry import Context, register

PATH = "statements.html"
PER_GROUP = 40  # statements listed under each bar or point (the rest: the games list and the marts)
MEASURES = (
    ("self-labelled deceptive", "self_deceptive_rate", "self_labels"),
    ("judged deceptive by listeners", "peer_judged_rate", "peer_labels"),
    ("checkable false claim", "false_claim_rate", "statements"),
)
METRICS = ("precision", "recall", "auroc")


def anchor(*parts: Any) -> str:
    """An element id from a group's key: letters, digits and dashes only."""
    return re.sub(r"[^A-Za-z0-9]+", "-", "-".join(str(p) for p in parts)).strip("-").lower()


def speaker_groups(m: Marts) -> list[dict[str, Any]]:
    return m.rows("select * from mart_statement_rates order by study, model, role") if m.has(
        "mart_statement_rates") else []


def listener_groups(m: Marts) -> list[dict[str, Any]]:
    return m.rows("select * from mart_statement_detection order by study, model, team, truth") if m.has(
        "mart_statement_detection") else []


def speaker_statements(m: Marts, g: Mapping[str, Any], limit: int) -> list[dict[str, Any]]:
    return m.rows(
        """select * from mart_statement_lenses where study = ? and speaker_model = ? and speaker_role = ?
           order by game_id, seq limit ?""",
        [g["study"], g["model"], g["role"], limit],
    )


def listener_statements(m: Marts, g: Mapping[str, Any], limit: int) -> list[dict[str, Any]]:
    return m.rows(
        """select game_id, seq, round, speaker, speaker_role, assessor, is_deceptive, confidence, suspicion_level,
                  speaker_mafia, false_claim, self_deceptive, text
           from mart_statement_labels
           where kind = 'peer' and study = ? and assessor_model = ? and assessor_team = ?
           order by game_id, seq, assessor limit ?""",
        [g["study"], g["model"], g["team"], limit],
    )


def linked_games(m: Marts, limit: int) -> list[str]:
    """The games whose statements the page lists: their transcripts must be rendered."""
    out: list[str] = []
    for g in speaker_groups(m):
        out += [r["game_id"] for r in speaker_statements(m, g, PER_GROUP)]
    seen = {(g["study"], g["model"], g["team"]) for g in listener_groups(m)}
    for study, model, team in sorted(seen):
        out += [r["game_id"] for r in listener_statements(m, {"study": study, "model": model, "team": team},
                                                          PER_GROUP)]
    return list(dict.fromkeys(out))[: max(limit, 1)]


def statement_link(ctx: Context, page: Page, game_id: str, seq: int) -> str | None:
    """The statement's line in its game's transcript, when that transcript was rendered."""
    path = ctx.transcripts.get(game_id)
    return f"{page.root}{path}#e{seq}" if path else None


@register(PATH, "Statements", "Statement labels: how often each model lies, by its own account and its listeners', "
          "and how well listeners catch it; each figure linked to its statements.", order=47, links=linked_games)
def build(ctx: Context) -> Page:
    m = ctx.marts
    page = Page(PATH, "Statements: lies and catches", "statements.html.j2",
                {"available": m.has("mart_statement_rates", "mart_statement_detection", "mart_statement_lenses",
                                    "mart_statement_labels")})
    if not page.data["available"]:
        return page
    several = len({g["study"] for g in speaker_groups(m)}) > 1
    speakers = []
    bars = []
    for g in speaker_groups(m):
        who = f"{g['study']} · " * several + f"{g['model']} · {g['role']}"
        key = anchor("speaker", g["study"], g["model"], g["role"])
        listed = speaker_statements(m, g, PER_GROUP)
        for r in listed:
            r["link"] = statement_link(ctx, page, r["game_id"], r["seq"])
        speakers.append({**g, "who": who, "anchor": key, "listed": listed})
        for label, rate, n in MEASURES:
            if g.get(rate) is not None:
                bars.append({"who": who, "measure": label, "rate": g[rate], "n": g[n], "href": f"#{key}"})
    if bars:
        page.add_chart("rates", charts.statement_rates_chart(bars),
                       "Per model and role: its own labels, its listeners' and the game's checkable claims. A bar "
                       "links to the statements behind it.")
    listeners: dict[tuple[str, str, str], dict[str, Any]] = {}
    points = []
    for g in listener_groups(m):
        who = f"{g['study']} · " * several + f"{g['model']} · {g['team']} listeners"
        key = anchor("listener", g["study"], g["model"], g["team"])
        entry = listeners.setdefault((g["study"], g["model"], g["team"]), {
            "who": who, "anchor": key, "rows": [], "listed": []})
        entry["rows"].append(g)
        for metric in METRICS:
            if g.get(metric) is not None:
                points.append({"who": who, "truth": g["truth"], "metric": metric, "value": g[metric],
                               "labels": g["labels"], "href": f"#{key}"})
    for (study, model, team), entry in listeners.items():
        listed = listener_statements(m, {"study": study, "model": model, "team": team}, PER_GROUP)
        for r in listed:
            r["link"] = statement_link(ctx, page, r["game_id"], r["seq"])
        entry["listed"] = listed
    if points:
        page.add_chart("detection", charts.statement_detection_chart(points),
                       "Listeners' verdicts against each truth: the speaker on the mafia's side, a checkable false "
                       "claim, the speaker's own label (WOLF's). A point links to the statements behind it.")
    page.data.update(speakers=speakers, listeners=list(listeners.values()), per_group=PER_GROUP)
    return page

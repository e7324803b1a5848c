"""Game transcripts: the list of rendered games (a registered page) and one page per game, from the event log
(`mart_transcript_events`), the game and player marts and what each model wrote (`mart_model_answers`).

Omniscient view: every event including private ones (marked with who saw them), each message as written (escaped by
the template, with truncations and format failures flagged), silences, every vote (random fallbacks marked), the
tally of each elimination, the outcome, and the model in each seat.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from mafiabench.dashboards.data import Marts, inferred_mark, records_inferred_seats
from mafiabench.dashboards.html import Page
from mafiabench.dashboards.page_registry import Context, register

_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,150}")
CHUNK = 500
INDEX = "transcripts/index.html"


def transcript_path(game_id: str) -> str:
    """The page of a game, relative to the dashboards root: the id itself when it is a safe file name (ids from
    the design and the importers are), else a slug plus a hash so two ids never share a page."""
    if _SAFE_ID.fullmatch(game_id) and game_id.lower() != "index":  # transcripts/index.html lists them
        name = game_id
    else:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", game_id).strip("-.")[:80] or "game"
        name = f"{slug}-{hashlib.sha256(game_id.encode()).hexdigest()[:10]}"
    return f"transcripts/{name}.html"


# -- the list of transcripts ---------------------------------------------------------------------------------------


# The games list is one static page: beyond this many games it lists the first games of every study and cell in turn
# (each cell's first, then each one's second, ...), so every cell a chart's bar counts has games in the list.
MAX_INDEX_ROWS = 20_000


@register(INDEX, "Games", "Every game: models, outcome and flags, filterable; transcripts linked.", order=100)
def build_index(ctx: Context) -> Page:
    """The list of games behind every figure: charts link here with a filter in the address (`#study=…&bar=…`),
    and a reader filters by study, model, outcome, flag or free text in the browser (no server)."""
    m = ctx.marts
    data: dict[str, Any] = {"note": ctx.transcripts_note, "rows": [], "total": 0, "capped": False, "cells": 0,
                            "inferred": False}
    page = Page(INDEX, "Games and transcripts", "transcripts_index.html.j2", data)
    if not m.has("fct_games"):
        return page
    total = m.rows("select count(*) as n from fct_games")[0]["n"]
    columns = ("game_id, study, cell, variant, status, winner, valid, invalid_reason, tie_decided, fallback_decided, "
               "n_format_failures, game_index")
    order = "study, cell, game_index, game_id"
    listed = f"select {columns} from fct_games" if total <= MAX_INDEX_ROWS else (
        f"select {columns} from (select *, row_number() over (partition by study, cell order by {order}) as turn "
        f"from fct_games) order by turn, study, cell limit {MAX_INDEX_ROWS}"
    )
    games = m.rows(f"select * from ({listed}) order by {order}")
    data["cells"] = len({(g["study"], g["cell"]) for g in games})
    ids = [g["game_id"] for g in games]
    roles: dict[str, dict[str, list[str]]] = {}
    # What the list shows of each role: its models, each marked `(inferred)` where an importer inferred the seat's
    # model (the web game's session labels); a model with seats of both kinds in one role is listed once each way.
    shown: dict[str, dict[str, list[tuple[str, str | None]]]] = {}
    # (a warehouse built before `model_inferred` existed has no inferred seat)
    flag = "coalesce(model_inferred, false)" if records_inferred_seats(m) else "false"
    if ids and m.has("fct_player_games"):
        for r in m.rows(
            f"""select game_id, role, list(distinct model order by model) as models,
                      list(distinct model order by model) filter (where not {flag}) as recorded,
                      list(distinct model order by model) filter (where {flag}) as inferred
               from fct_player_games where game_id in (select unnest($ids)) group by game_id, role""",
            {"ids": ids},
        ):
            roles.setdefault(r["game_id"], {})[r["role"]] = list(r["models"] or [])
            recorded, inferred = set(r["recorded"] or []), set(r["inferred"] or [])
            seats = shown.setdefault(r["game_id"], {}).setdefault(r["role"], [])
            for model in r["models"] or []:
                if model in recorded:
                    seats.append((model, None))
                if model in inferred:
                    seats.append((model, inferred_mark(True)))
    bars: dict[str, list[str]] = {}
    if ids and m.has("mart_capability_games"):
        for r in m.rows(
            """select game_id, list(distinct capability_cell) as keys
               from mart_capability_games where game_id in (select unnest($ids)) group by game_id""",
            {"ids": ids},
        ):
            bars[r["game_id"]] = list(r["keys"] or [])
    if ids and m.has("mart_head_to_head"):  # the leaderboard's head-to-head cells (key as leaderboard.py writes it)
        for r in m.rows(
            """select game_id, list('h2h|' || mafia_model || '|' || town_model) as keys
               from (select unnest(game_ids) as game_id, mafia_model, town_model from mart_head_to_head)
               where game_id in (select unnest($ids)) group by game_id""",
            {"ids": ids},
        ):
            bars.setdefault(r["game_id"], []).extend(r["keys"] or [])
    rules: dict[str, list[str]] = {}
    if ids and m.has("mart_exceptional_games"):  # the exceptional-games chart's bars: a cell's games flagged by a rule
        for r in m.rows(
            """select game_id, list(distinct rule order by rule) as rules from mart_exceptional_games
               where game_id in (select unnest($ids)) group by game_id""",
            {"ids": ids},
        ):
            rules[r["game_id"]] = list(r["rules"] or [])
    for g in games:
        gid = g["game_id"]
        g["rules"] = rules.get(gid, [])
        g["roles"] = roles.get(gid, {})  # the filters' data: the models themselves
        g["shown"] = shown.get(gid, {})
        g["models"] = sorted({mod for mods in g["roles"].values() for mod in mods})
        g["bars"] = bars.get(gid, [])
        g["outcome"] = game_outcome(g)
        g["flags"] = game_flags(g)
    data.update(rows=games, total=total, capped=total > len(games), roles=ROLE_COLUMNS,
                inferred=any(mark for g in games for seats in g["shown"].values() for _, mark in seats))
    return page


ROLE_COLUMNS = ("mafioso", "detective", "villager")


def game_outcome(g: Mapping[str, Any]) -> str:
    """One word for the index: who won, or why nobody did."""
    if g.get("status") in ("failed", "abandoned", "unfinished"):
        return str(g["status"])
    return f"{g['winner']} won" if g.get("winner") else str(g.get("status") or "no winner")


def game_flags(g: Mapping[str, Any]) -> list[str]:
    flags = []
    if g.get("valid") is False:
        flags.append("invalid")
    if g.get("tie_decided"):
        flags.append("tie-break")
    if g.get("fallback_decided"):
        flags.append("random fallback")
    if g.get("n_format_failures"):
        flags.append("format failure")
    return flags


# -- one page per game ---------------------------------------------------------------------------------------------


def _chunks(items: Sequence[str], size: int = CHUNK) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield list(items[i : i + size])


def _by_game(rows: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["game_id"], []).append(r)
    return out


def transcript_pages(m: Marts, game_ids: Sequence[str], *, rendered: Mapping[str, str]) -> Iterator[Page]:
    """Pages for `game_ids`, fetched in chunks (one query per table per chunk, not per game)."""
    exceptional = m.has("mart_exceptional_games")
    costs = m.has("mart_game_costs")
    for chunk in _chunks(list(game_ids)):
        params = {"ids": chunk}
        games = {
            r["game_id"]: r for r in m.rows("select * from fct_games where game_id in (select unnest($ids))", params)
        }
        errors: dict[str, Any] = {}
        seeds: dict[str, Any] = {}
        if m.has("mart_game_details"):
            for r in m.rows("select * from mart_game_details where game_id in (select unnest($ids))", params):
                errors[r["game_id"]] = r.get("error")
                seeds[r["game_id"]] = r.get("seed")
        players = _by_game(
            m.rows(
                "select * from fct_player_games where game_id in (select unnest($ids)) order by game_id, seat", params
            )
        )
        events = _by_game(
            m.rows(
                """select game_id, seq, phase, round, event_type, actor, target, text, visibility, format_failure,
                      random_fallback, truncated, tie_break, data_json
               from mart_transcript_events where game_id in (select unnest($ids)) order by game_id, seq""",
                params,
            )
        )
        flags = (
            _by_game(
                m.rows(
                    "select game_id, rule, surprise, reason from mart_exceptional_games "
                    "where game_id in (select unnest($ids)) order by surprise desc",
                    params,
                )
            )
            if exceptional
            else {}
        )
        cost = (
            {
                r["game_id"]: r
                for r in m.rows("select * from mart_game_costs where game_id in (select unnest($ids))", params)
            }
            if costs
            else {}
        )
        calls = (
            _by_game(
                m.rows(
                    """select game_id, call_index, player, action, phase, round, model, started_at, attempts,
                          error_class, format_failure, response_text
                   from mart_model_answers where game_id in (select unnest($ids))
                   order by game_id, call_index""",
                    params,
                )
            )
            if m.has("mart_model_answers")
            else {}
        )
        labels = (
            _by_game(
                m.rows(
                    """select game_id, seq, assessor, kind, is_deceptive, confidence, deception_type,
                          suspicion_level, reasoning, format_failure
                   from mart_statement_labels where game_id in (select unnest($ids))
                   order by game_id, seq, kind desc, assessor""",
                    params,
                )
            )
            if m.has("mart_statement_labels")
            else {}
        )
        for gid in chunk:
            game = games.get(gid, {"game_id": gid})
            game = {**game, "error": errors.get(gid), "seed": seeds.get(gid)}
            yield transcript_page(
                game,
                players.get(gid, []),
                events.get(gid, []),
                flags=flags.get(gid, []),
                cost=cost.get(gid),
                path=rendered.get(gid) or transcript_path(gid),
                calls=calls.get(gid, []),
                labels=labels.get(gid, []),
            )


def transcript_page(
    game: Mapping[str, Any],
    players: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
    *,
    flags: Sequence[Mapping[str, Any]] = (),
    cost: Mapping[str, Any] | None = None,
    path: str | None = None,
    calls: Sequence[Mapping[str, Any]] = (),
    labels: Sequence[Mapping[str, Any]] = (),
) -> Page:
    gid = str(game["game_id"])
    views = [v for v in (event_view(e) for e in events) if v is not None]
    by_seq: dict[Any, list[dict[str, Any]]] = {}
    for lb in labels:  # statement labels ([statements]) shown beside the message they judge
        by_seq.setdefault(lb["seq"], []).append(dict(lb))
    for v in views:
        if v["kind"] == "message" and v.get("seq") in by_seq:
            v["labels"] = by_seq[v["seq"]]
    attach_raw_answers(views, [c for c in calls if c.get("format_failure")])
    attach_full_answers(views, [c for c in calls if not c.get("format_failure") and c.get("response_text")])
    failure = failure_text(game, [c for c in calls if c.get("response_text") is None and c.get("error_class")])
    game = {**game, "failure": failure, "ended": game.get("status") not in ("failed", "abandoned", "unfinished")}
    # A seat whose model an importer inferred (`fct_player_games.model_inferred`: the web game's session labels) is
    # marked `(inferred)` where the page names its model; a warehouse built before the column has none.
    seats = [{**p, "model_mark": inferred_mark(True) if p.get("model_inferred") else None} for p in players]
    return Page(
        path or transcript_path(gid),
        f"Game {gid}",
        "transcript.html.j2",
        {
            "game": {k: game.get(k) for k in GAME_FIELDS} | dict(game),
            "cost": cost,
            "flags": list(flags),
            "players": seats,
            "who": {str(p["name"]): p for p in seats},
            "inferred": any(p["model_mark"] for p in seats),
            "events": views,
        },
    )


_CALL_ACTION = {"message": "speak", "silence": "speak", "vote": "vote", "kill": "kill", "investigate": "investigate"}


def attach_raw_answers(views: list[dict[str, Any]], failed_format: Sequence[Mapping[str, Any]]) -> None:
    """Put each format-failing model answer on the event it became (a silence, a random vote): the same player,
    action and phase, in order, so a reader sees what the model actually said."""
    pending = list(failed_format)
    for v in views:
        if not any(kind == "bad" and text == "format failure" for text, kind, _ in v["flags"]):
            continue
        action = _CALL_ACTION.get(str(v["kind"]))
        for i, call in enumerate(pending):
            if call.get("player") == v.get("actor") and (action is None or call.get("action") == action):
                v["raw_answer"] = call.get("response_text") or ""
                del pending[i]
                break


def attach_full_answers(views: list[dict[str, Any]], answers: Sequence[Mapping[str, Any]]) -> None:
    """The replay: put each parsed model answer on the event it became (same player and action, in order) when the
    model wrote more than the event shows (the reasoning after its message or vote), beside what the others saw."""
    pending = list(answers)
    for v in views:
        action = _CALL_ACTION.get(str(v["kind"]))
        if action is None or "raw_answer" in v:
            continue
        for i, call in enumerate(pending):
            if call.get("player") == v.get("actor") and call.get("action") == action:
                text = str(call.get("response_text") or "")
                if text.strip() != str(v.get("text") or "").strip():
                    v["full_answer"] = text
                del pending[i]
                break


def failure_text(game: Mapping[str, Any], failed_calls: Sequence[Mapping[str, Any]]) -> str | None:
    """What failed and when, for a failed game: the call that failed for good, else the recorded error."""
    if game.get("status") != "failed":
        return None
    error = str(game.get("error") or "").strip().splitlines()
    if failed_calls:
        c = failed_calls[-1]
        attempts = c.get("attempts")
        tries = f" after {attempts} attempt{'s' if attempts != 1 else ''}" if attempts else ""
        return (
            f"the {c.get('action')} call for {c.get('player')} ({c.get('model')}) in {c.get('phase')} "
            f"{c.get('round')} failed for good{tries} ({c.get('error_class')}), started {c.get('started_at')}"
            + (f": {error[0]}" if error else "")
        )
    return error[0] if error else "the game failed (no error was recorded)"


GAME_FIELDS = (
    "winner", "status", "outcome_reason", "tie_decided", "fallback_decided", "valid", "invalid_reason", "study",
    "experiment", "cell", "variant", "days", "seed", "prompt_version", "discussion_rounds", "night_mode",
    "n_messages", "n_words", "n_format_failures", "n_decisions", "error",
)  # fmt: skip


def _data(e: Mapping[str, Any]) -> dict[str, Any]:
    raw = e.get("data_json")
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _clock(data: Mapping[str, Any]) -> str:
    clock = data.get("clock")
    if isinstance(clock, int | float):
        s = int(clock)
        return f"[{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}] "
    return ""


def _flags(e: Mapping[str, Any], data: Mapping[str, Any]) -> list[tuple[str, str, str | None]]:
    """Badges (text, kind, hover text) for what happened to this event."""
    out: list[tuple[str, str, str | None]] = []
    if e.get("truncated"):
        limit = data.get("message_limit") or data.get("limit")
        out.append(("truncated" + (f" at {limit} characters" if limit else ""), "warn", None))
    if e.get("format_failure"):
        out.append(("format failure", "bad", None))
    if e.get("random_fallback"):
        out.append(("random fallback", "bad", "the answer was unusable; the engine drew a random choice"))
    if e.get("tie_break"):
        out.append(("tie-break", "warn", None))
    return out


def _visibility(e: Mapping[str, Any]) -> tuple[str, str] | None:
    """(badge text, hover text) for a private event, None for a public one."""
    vis = e.get("visibility") or "public"
    if vis == "public":
        return None
    label = "mafia only" if vis == "team:mafia" else (f"only {vis.split(':', 1)[1]}" if ":" in vis else vis)
    return label, f"visibility: {vis}"


def event_view(e: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the template shows of one event (None: not shown). Text stays raw here; the template escapes it."""
    kind = e.get("event_type")
    if kind in ("game_start", "role_assigned"):
        return None
    data = _data(e)
    view: dict[str, Any] = {
        "kind": kind,
        "cls": kind,
        "seq": e.get("seq"),
        "private": (e.get("visibility") or "public") != "public",
        "clock": _clock(data),
        "actor": e.get("actor"),
        "target": e.get("target"),
        "text": e.get("text"),
        "flags": _flags(e, data),
        "visibility": _visibility(e),
    }
    if kind == "phase_start":
        view.update(cls="phase", text=e.get("text") or f"{e.get('phase')} {e.get('round')}")
    elif kind == "message":
        view.update(text=e.get("text") or "", more="…" if e.get("truncated") else "")
    elif kind == "silence":
        view["note"] = " (its answer broke the format)" if e.get("format_failure") else ""
    elif kind == "vote":
        view["what"] = "proposes to kill" if data.get("kind") == "night_proposal" else "votes for"
    elif kind == "elimination":
        tally = data.get("votes")
        tally_text = ""
        if isinstance(tally, dict) and tally:
            ordered = sorted(tally.items(), key=lambda kv: (-int(kv[1] or 0), str(kv[0])))
            tally_text = " — votes: " + ", ".join(f"{k} {v}" for k, v in ordered)
        view.update(
            text=e.get("text") or f"{e.get('target')} was eliminated",
            role=f" ({data['role']})" if data.get("role") else "",
            tally=tally_text,
        )
    elif kind == "game_end":
        winner, reason = data.get("winner"), data.get("reason")
        view.update(
            cls="end",
            head=f"{winner} wins" if winner else "no winner",
            reason=f" — {reason}" if reason else "",
            tie_decided=bool(data.get("tie_decided")),
        )
    elif kind == "belief":
        probs = data.get("probability") or {}
        shown = (
            ", ".join(f"{k} {float(v):.0%}" for k, v in sorted(probs.items(), key=lambda kv: -float(kv[1] or 0)))
            if isinstance(probs, dict)
            else ""
        )
        action = data.get("action")
        view.update(shown=shown, action=f" ({action})" if action else "")
    else:
        view.update(kind="other", cls=str(kind or "event"), text=e.get("text") or kind)
    return view

"""Game transcripts: the list of rendered games (a registered page) and one page per game, from the event log
(`stg_events`) and the game and player marts.

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

from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import Page
from mafiabench.dashboards.registry import Context, register

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


@register(INDEX, "Transcripts", "Every rendered game transcript.", order=100)
def build_index(ctx: Context) -> Page:
    ids = list(ctx.transcripts)
    rows = (
        ctx.marts.rows(
            """select game_id, study, cell, variant, status, winner, tie_decided, fallback_decided, n_format_failures
               from fct_games where game_id in (select unnest($ids)) order by study, cell, game_index, game_id""",
            {"ids": ids},
        )
        if ids
        else []
    )
    return Page(INDEX, "Game transcripts", "transcripts_index.html.j2", {"note": ctx.transcripts_note, "rows": rows})


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
    has_error = "error" in m.columns("stg_games")
    for chunk in _chunks(list(game_ids)):
        params = {"ids": chunk}
        games = {
            r["game_id"]: r for r in m.rows("select * from fct_games where game_id in (select unnest($ids))", params)
        }
        errors: dict[str, Any] = {}
        seeds: dict[str, Any] = {}
        if m.has("stg_games"):
            cols = "game_id, seed" + (", error" if has_error else "")
            for r in m.rows(f"select {cols} from stg_games where game_id in (select unnest($ids))", params):
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
               from stg_events where game_id in (select unnest($ids)) order by game_id, seq""",
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
            )


def transcript_page(
    game: Mapping[str, Any],
    players: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
    *,
    flags: Sequence[Mapping[str, Any]] = (),
    cost: Mapping[str, Any] | None = None,
    path: str | None = None,
) -> Page:
    gid = str(game["game_id"])
    views = [v for v in (event_view(e) for e in events) if v is not None]
    return Page(
        path or transcript_path(gid),
        f"Game {gid}",
        "transcript.html.j2",
        {
            "game": {k: game.get(k) for k in GAME_FIELDS} | dict(game),
            "cost": cost,
            "flags": list(flags),
            "players": list(players),
            "who": {str(p["name"]): p for p in players},
            "events": views,
        },
    )


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

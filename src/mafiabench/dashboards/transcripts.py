"""One transcript page per game, from the event log (`stg_events`) and the game and player marts.

Omniscient view: every event including private ones (marked with who saw them), each message as written (escaped,
with truncations and format failures flagged), silences, every vote (random fallbacks marked), the tally of each
elimination, the outcome, and the model in each seat.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import Column, Markup, Page, badge, esc, fmt_float, fmt_int, fmt_usd, link, table

_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,150}")
CHUNK = 500


def transcript_path(game_id: str) -> str:
    """The page of a game, relative to the dashboards root: the id itself when it is a safe file name (ids from
    the design and the importers are), else a slug plus a hash so two ids never share a page."""
    if _SAFE_ID.fullmatch(game_id) and game_id.lower() != "index":  # transcripts/index.html lists them
        name = game_id
    else:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", game_id).strip("-.")[:80] or "game"
        name = f"{slug}-{hashlib.sha256(game_id.encode()).hexdigest()[:10]}"
    return f"transcripts/{name}.html"


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
    page = Page(path or transcript_path(gid), f"Game {gid}", Markup(""))
    root = page.root
    who = {p["name"]: p for p in players}
    parts: list[str] = [
        f'<p class="muted">{link(root + "transcripts/index.html", "All transcripts")} · '
        f"{link(root + 'exceptional-games.html', 'Exceptional games')}</p>"
    ]
    parts.append(_summary(game, cost))
    if flags:
        parts.append("<h2>Why this game is flagged</h2><ul>")
        for f in flags:
            parts.append(
                f"<li>{badge(f['rule'], 'warn')} surprise {esc(fmt_float(f.get('surprise'), 2))}: "
                f"{esc(f.get('reason'))}</li>"
            )
        parts.append("</ul>")
    parts.append("<h2>Seats</h2>")
    parts.append(
        table(
            list(players),
            [
                Column("seat", "seat", numeric=True),
                Column("name", "name"),
                Column("role", "role"),
                Column("team", "team"),
                Column("model", "model"),
                Column("agent", "agent"),
                Column("fate", "fate"),
                Column("won", "won"),
            ],
            empty="No players recorded.",
        )
    )
    parts.append("<h2>Transcript</h2>")
    parts.append('<p class="note">Omniscient view: private events are marked with who saw them.</p>')
    parts.append('<ol class="log">')
    for e in events:
        item = _event(e, who)
        if item:
            parts.append(item)
    parts.append("</ol>")
    page.body = Markup("".join(parts))
    return page


def _summary(game: Mapping[str, Any], cost: Mapping[str, Any] | None) -> Markup:
    winner = game.get("winner")
    outcome = f"{winner} won" if winner else (game.get("status") or "no winner")
    flags = []
    if game.get("tie_decided"):
        flags.append(badge("decided by a tie-break", "warn"))
    if game.get("fallback_decided"):
        flags.append(badge("decided by a random fallback vote", "warn"))
    if game.get("valid") is False:
        flags.append(badge(f"invalid: {game.get('invalid_reason') or 'no reason given'}", "bad"))
    if game.get("status") == "failed":
        flags.append(badge("failed", "bad"))
    rows = [
        (
            "outcome",
            Markup(f"<strong>{esc(outcome)}</strong> ({esc(game.get('outcome_reason') or '')}) " + "".join(flags)),
        ),
        ("study / experiment", f"{game.get('study') or ''} / {game.get('experiment') or '–'}"),
        ("cell", game.get("cell")),
        ("variant", game.get("variant")),
        ("days", game.get("days")),
        ("seed", game.get("seed")),
        ("prompt version", game.get("prompt_version")),
        (
            "discussion rounds / night",
            f"{game.get('discussion_rounds') if game.get('discussion_rounds') is not None else '–'}"
            f" / {game.get('night_mode') or '–'}",
        ),
        ("messages / words", f"{fmt_int(game.get('n_messages'))} / {fmt_int(game.get('n_words'))}"),
        (
            "format failures",
            f"{fmt_int(game.get('n_format_failures'))} of {fmt_int(game.get('n_decisions'))} decisions",
        ),
    ]
    if cost:
        rows.append(
            (
                "model calls",
                f"{fmt_int(cost.get('n_calls'))} calls, {fmt_int(cost.get('total_tokens'))} "
                f"tokens, {fmt_usd(cost.get('cost_usd'))}",
            )
        )
    if game.get("error"):
        rows.append(("error", Markup(f'<pre class="json">{esc(game["error"])}</pre>')))
    return table([{"k": k, "v": v} for k, v in rows], [Column("", "k"), Column("", "v")], cls="facts", header=False)


def _player(name: Any, who: Mapping[str, Mapping[str, Any]]) -> Markup:
    if name is None:
        return Markup("")
    p = who.get(str(name))
    if not p:
        return Markup(f'<span class="speaker">{esc(name)}</span>')
    return Markup(
        f'<span class="speaker" title="{esc(p.get("role"))} · {esc(p.get("model"))} · seat {esc(p.get("seat"))}">'
        f'{esc(name)}</span> <span class="muted">({esc(p.get("role"))})</span>'
    )


def _visibility(e: Mapping[str, Any]) -> Markup:
    vis = e.get("visibility") or "public"
    if vis == "public":
        return Markup("")
    label = "mafia only" if vis == "team:mafia" else (f"only {vis.split(':', 1)[1]}" if ":" in vis else vis)
    return badge(label, "private", title=f"visibility: {vis}")


def _flags(e: Mapping[str, Any], data: Mapping[str, Any]) -> Markup:
    out = []
    if e.get("truncated"):
        limit = data.get("message_limit") or data.get("limit")
        out.append(badge("truncated" + (f" at {limit} characters" if limit else ""), "warn"))
    if e.get("format_failure"):
        out.append(badge("format failure", "bad"))
    if e.get("random_fallback"):
        out.append(badge("random fallback", "bad", title="the answer was unusable; the engine drew a random choice"))
    if e.get("tie_break"):
        out.append(badge("tie-break", "warn"))
    return Markup("".join(out))


def _li(cls: str, e: Mapping[str, Any], content: Any) -> str:
    private = " private" if (e.get("visibility") or "public") != "public" else ""
    return f'<li class="{cls}{private}" data-seq="{esc(e.get("seq"))}">{esc(content)}</li>'


def _event(e: Mapping[str, Any], who: Mapping[str, Mapping[str, Any]]) -> str:
    kind = e.get("event_type")
    data = _data(e)
    flags = _flags(e, data)
    vis = _visibility(e)
    clock = esc(_clock(data))
    if kind in ("game_start", "role_assigned"):
        return ""
    if kind == "phase_start":
        return _li("phase", e, e.get("text") or f"{e.get('phase')} {e.get('round')}")
    if kind == "message":
        text = e.get("text") or ""
        more = "…" if e.get("truncated") else ""
        return _li(
            "message",
            e,
            Markup(f'{clock}{_player(e.get("actor"), who)}: <q class="says">{esc(text)}{more}</q>{flags}{vis}'),
        )
    if kind == "silence":
        note = " (its answer broke the format)" if e.get("format_failure") else ""
        return _li(
            "silence", e, Markup(f"{clock}{_player(e.get('actor'), who)} remained silent{esc(note)}.{flags}{vis}")
        )
    if kind == "vote":
        what = "proposes to kill" if data.get("kind") == "night_proposal" else "votes for"
        return _li(
            "vote",
            e,
            Markup(f"{clock}{_player(e.get('actor'), who)} {esc(what)} {_player(e.get('target'), who)}{flags}{vis}"),
        )
    if kind == "elimination":
        tally = data.get("votes")
        tally_text = ""
        if isinstance(tally, dict) and tally:
            ordered = sorted(tally.items(), key=lambda kv: (-int(kv[1] or 0), str(kv[0])))
            tally_text = " — votes: " + ", ".join(f"{k} {v}" for k, v in ordered)
        role = f" ({data['role']})" if data.get("role") else ""
        text = e.get("text") or f"{e.get('target')} was eliminated"
        return _li("elimination", e, Markup(f"{clock}{esc(text)}{esc(role)}{esc(tally_text)}{flags}{vis}"))
    if kind == "game_end":
        winner = data.get("winner")
        reason = data.get("reason")
        head = f"{winner} wins" if winner else "no winner"
        extra = badge("decided by a tie-break", "warn") if data.get("tie_decided") else Markup("")
        return _li("end", e, Markup(f"Game over: {esc(head)}{esc(f' — {reason}' if reason else '')}{extra}"))
    if kind == "belief":
        probs = data.get("probability") or {}
        shown = (
            ", ".join(f"{k} {float(v):.0%}" for k, v in sorted(probs.items(), key=lambda kv: -float(kv[1] or 0)))
            if isinstance(probs, dict)
            else ""
        )
        action = data.get("action")
        return _li(
            "belief",
            e,
            Markup(
                f"{clock}{_player(e.get('actor'), who)} belief{esc(f' ({action})' if action else '')}: "
                f"{esc(shown)}{flags}{vis}"
            ),
        )
    actor = _player(e.get("actor"), who) if e.get("actor") else Markup("")
    sep = Markup(": ") if actor else Markup("")
    return _li(str(kind or "event"), e, Markup(f"{clock}{actor}{sep}{esc(e.get('text') or kind)}{flags}{vis}"))

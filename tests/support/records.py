"""Hand-built game records for the SQL and mart tests, shaped exactly like the engine's logs (their own checks are
tests/transform/test_hand_built_records.py), and a fresh warehouse to land them in."""

from __future__ import annotations

import random
import tempfile
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

from mafiabench.engine import Event, make_game
from mafiabench.record import GameRecord, PlayerRecord, Provenance, record_from_engine
from mafiabench.testing import play_random
from mafiabench.transform.build.marts import build_models
from mafiabench.warehouse.raw import ensure_schema, load_records

# Seat order used by the helpers: name, role.
SEATS: tuple[tuple[str, str], ...] = (
    ("Alice", "mafioso"),
    ("Bob", "detective"),
    ("Charlie", "villager"),
    ("Diana", "villager"),
)
MAFIA_WIN_VOTES = {"Alice": "Bob", "Bob": "Alice", "Charlie": "Bob"}  # Bob (detective) arrested 2-1
TOWN_WIN_VOTES = {"Alice": "Bob", "Bob": "Alice", "Charlie": "Alice"}  # Alice (mafioso) arrested 2-1
TIE_VOTES = {"Alice": "Charlie", "Bob": "Alice", "Charlie": "Bob"}  # 1-1-1: a tie-break decides


_TMP = tempfile.TemporaryDirectory(prefix="mafiabench-test-wh-")


def fresh_con() -> duckdb.DuckDBPyConnection:
    """A new, empty warehouse file (dbt builds into a file: it cannot share an in-memory database)."""
    path = Path(tempfile.mkdtemp(dir=_TMP.name)) / "w.duckdb"
    con = duckdb.connect(str(path))
    ensure_schema(con)
    return con


def mini_record(
    game_id: str,
    *,
    models: Mapping[str, str] | str = "m",
    votes: Mapping[str, str] = TOWN_WIN_VOTES,
    eliminated: str | None = None,
    victim: str = "Diana",
    messages: Sequence[tuple[str, str | None]] = (),
    discussion_rounds: int = 2,
    fallback_voters: Iterable[str] = (),
    design: Mapping[str, Any] | None = None,
    seats: Sequence[tuple[str, str]] = SEATS,
    valid: bool = True,
    invalid_reason: str | None = None,
    source: str = "simulation",
    calls: Sequence[dict[str, Any]] = (),
    prompt_version: str | None = "v4.1",
    mafioso_knows_detective: bool = False,
) -> GameRecord:
    """A scripted-night Mini-Mafia game: `victim` dies at night, the detective learns the mafioso, then
    `messages` (speaker, text or None for a format-failure silence) and `votes`. `models` maps role -> model,
    or name -> model, or is one model for everyone. A tie needs `eliminated`."""
    role_of = dict(seats)
    names = [n for n, _ in seats]
    if isinstance(models, str):
        model_of = {n: models for n in names}
    else:
        model_of = {n: models.get(n, models.get(role_of[n], "m")) for n in names}
    mafioso = next(n for n in names if role_of[n] == "mafioso")
    detective = next(n for n in names if role_of[n] == "detective")
    events: list[Event] = []

    def emit(phase: str, rnd: int, type_: str, **kw: Any) -> None:
        events.append(Event(seq=len(events), phase=phase, round=rnd, type=type_, **kw))  # type: ignore[arg-type]

    emit(
        "setup",
        0,
        "game_start",
        data={"variant": "mini-mafia", "players": names, "composition": {"detective": 1, "mafioso": 1, "villager": 2}},
    )
    for n in names:
        emit("setup", 0, "role_assigned", actor=n, visibility=f"player:{n}", data={"role": role_of[n]})
    emit("night", 1, "phase_start", text="Night 1 begins.")
    emit("night", 1, "kill", actor=mafioso, target=victim, visibility="team:mafia", text=f"You killed {victim}.")
    emit("night", 1, "death", target=victim, text=f"{victim} was found dead.", data={"cause": "night_kill"})
    emit(
        "night",
        1,
        "investigate",
        actor=detective,
        target=mafioso,
        visibility=f"player:{detective}",
        data={"result": "mafioso", "scripted": True},
    )
    if mafioso_knows_detective:
        emit("night", 1, "info", target=detective, visibility=f"player:{mafioso}", data={"detective": detective})
    emit("day", 1, "phase_start", text="Day 1 begins.")
    per_round = max(1, len(messages) // max(1, discussion_rounds)) if messages else 1
    for i, (speaker, text) in enumerate(messages):
        rnd = min(discussion_rounds, i // per_round + 1)
        if text is None:
            emit("day", 1, "silence", actor=speaker, text=f"{speaker} remained silent.", format_failure=True,
                 random_fallback=True, data={"discussion_round": rnd})
        else:
            emit("day", 1, "message", actor=speaker, text=text, data={"discussion_round": rnd})
    fallback = set(fallback_voters)
    for voter, target in votes.items():
        emit("day", 1, "vote", actor=voter, target=target, format_failure=voter in fallback,
             random_fallback=voter in fallback)
    counts = Counter(votes.values())
    top = max(counts.values())
    tied = [n for n, c in counts.items() if c == top]
    tie = len(tied) > 1
    if eliminated is None:
        if tie:
            raise ValueError("a tie needs `eliminated`")
        eliminated = tied[0]
    winner = "town" if role_of[eliminated] == "mafioso" else "mafia"
    emit("day", 1, "elimination", target=eliminated, tie_break=tie, text=f"{eliminated} was arrested",
         data={"votes": dict(counts), "role": role_of[eliminated], "role_revealed": False})
    emit("end", 1, "game_end", data={"winner": winner, "reason": "x", "status": "finished", "tie_decided": tie,
                                     "roles": role_of})
    return GameRecord(
        game_id=game_id,
        variant="mini-mafia",
        seed=zlib.crc32(game_id.encode()),  # distinct per game, as simulated seeds are (else: a copied game)
        rules={"discussion_rounds": discussion_rounds, "message_limit": 200, "night": "scripted",
               "mafioso_knows_detective": mafioso_knows_detective, "names": names},
        players=[
            PlayerRecord(seat=i, name=n, role=role_of[n], agent=f"fake/{model_of[n]}", model=model_of[n])
            for i, n in enumerate(names)
        ],
        events=events,
        outcome={"status": "finished", "winner": winner, "reason": "x", "tie_decided": tie, "days": 1},
        calls=list(calls),
        prompt={"version": prompt_version, "sha256": "0" * 64} if prompt_version else None,
        design=dict(design) if design is not None else None,
        provenance=Provenance(git_commit=None, source=source),
        validity={"valid": valid, "reason": invalid_reason},
    )


def rotated_seats(i: int, seats: Sequence[tuple[str, str]] = SEATS) -> tuple[tuple[str, str], ...]:
    """`seats` turned by `i` places: game i seats the i-th player first. The helpers' games otherwise seat the
    mafioso first in every game, a listing-order leak the gate refuses (`mart_listing_leaks`) once a study has 10."""
    k = i % len(seats)
    return (*seats[k:], *seats[:k])


def cell_records(
    prefix: str,
    *,
    n: int,
    mafia_wins: int,
    models: Mapping[str, str] | str,
    tie_wins: int = 0,
    design: Mapping[str, Any] | None = None,
    rotate_seats: bool = False,
    **kw: Any,
) -> list[GameRecord]:
    """`n` games of one cell of which `mafia_wins` mafia wins, the first `tie_wins` of those decided by a tie;
    `rotate_seats`: game i's seats turned by i places (`rotated_seats`)."""
    out = []
    for i in range(n):
        if rotate_seats:
            kw["seats"] = rotated_seats(i)
        if i < mafia_wins:
            if i < tie_wins:
                rec = mini_record(f"{prefix}-{i}", models=models, votes=TIE_VOTES, eliminated="Charlie",
                                  design=design, **kw)
            else:
                rec = mini_record(f"{prefix}-{i}", models=models, votes=MAFIA_WIN_VOTES, design=design, **kw)
        else:
            rec = mini_record(f"{prefix}-{i}", models=models, votes=TOWN_WIN_VOTES, design=design, **kw)
        out.append(rec)
    return out


def design(cell: str, capability: str | None, target: str, background: str, experiment: str = "exp") -> dict[str, Any]:
    caps = ["deceive", "detect", "disclose"] if capability is None else [capability]
    return {"experiment": experiment, "cell": cell, "game_index": 0, "capabilities": caps, "target": target,
            "background": background}


def landed(records: Iterable[GameRecord], **build: Any) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory warehouse with `records` landed and every model built (no quality gate)."""
    con = fresh_con()
    load_records(con, list(records))
    build_models(con, **build)
    return con


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def one(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None) -> dict[str, Any]:
    out = rows(con, sql, params)
    assert len(out) == 1, out
    return out[0]


def engine_records(n: int, *, seed: int = 0, variant: str = "mini-mafia", rules: Mapping[str, Any] | None = None,
                   failure_rate: float = 0.1) -> list[GameRecord]:
    """Games played by the real engine with random answers (some format failures), one model per role."""
    out = []
    for i in range(n):
        game = play_random(
            make_game(variant, dict(rules or {}), seed=seed * 100_000 + i),
            random.Random(i),
            failure_rate=failure_rate,
            say=lambda rng, d, g: f"I trust {rng.choice([p.name for p in g.players if p.name != d.player])}",
        )
        model_of = {p.name: {"mafioso": "M", "detective": "D"}.get(p.role, "V") for p in game.players}
        out.append(record_from_engine(f"e{seed}-{i}", game, {k: f"fake/{v}" for k, v in model_of.items()}, model_of))
    return out


def call(i: int, provider: str, model: str, *, inp: int, out: int, cached: int = 0, prompt: int = 100,
         reuse: int = 0, error: str | None = None, failed: bool = False, attempts: int = 1) -> dict:
    return {
        "index": i, "player": "Alice", "action": "speak", "phase": "day", "round": 1, "provider": provider,
        "model": model, "started_at": "2026-01-01T00:00:00", "latency_ms": 100.0 * (i + 1), "attempts": attempts,
        "input_tokens": inp, "output_tokens": out, "cached_tokens": cached, "error_class": error,
        "finish_reason": "stop", "parse": {"format_failure": False}, "prompt_chars": prompt,
        "prefix_reuse_chars": reuse, "response": None if failed else "ok", "request": {"messages": []},
    }

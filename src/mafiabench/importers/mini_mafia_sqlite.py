"""The Mini-Mafia study's SQLite databases (`mini-mafia-benchmark/database/*.db`) → `mini-mafia` game records.

The shape is `database/schema.sql` of bastoscostadavi/llm-mafia-game (also `experiments/mini-mafia/database/
schema.sql`), filled by `run_mini_mafia_batch.py` through `database/db_utils.py`:

- `games(game_id, timestamp, winner 'town'|'mafia', was_tie, batch_id)`, `batches(batch_id, model_configs JSON, …)`;
- `game_players(game_id, player_id, character_name, role, final_status 'alive'|'killed'|'arrested')`, with
  `players(player_id, player_type 'llm'|'human', model_name, model_provider, temperature)`; `player_id` may be NULL
  for the night victim, who never played;
- `game_sequence(game_id, step, action 'kill'|'investigate'|'discuss'|'vote', actor, raw_response,
  parsed_result)`: the night's kill and investigation (scripted: the detective investigates the mafioso), every
  discussion message (`parsed_result` is the public message, or `remained silent`) and every vote (the target);
- `votes(game_id, character_name, role, voted_for, parsed_successfully)` where filled; `parsed_successfully = 0`
  marks a vote cast at random after a failed format;
- `benchmark(capability, background, target, game_id, count)` in the benchmark database: the paper's cells.

Where a step keeps the model's raw answer, it is read again with mafiabench's own reference parser
(`agents.parsing`: first line, quotes, the unclosed-quote marker, a name found later in the answer, reasoning
wrappers stripped) and the event says what that gives and whether it agrees with the reference's own parse
(`data.reparsed`, `data.parse_agrees`): format-failure rates of the two readings can be compared game by game on
the study's own outputs (`mart_format_failures` counts the reference's).

Seats are not recorded (names are Alice, Bob, Charlie, Diana whatever the roles), so none is invented. What the
mafioso was told about the detective is not in the database either (no memories), so that rule is recorded as
unknown (None). Every game is cross-checked (winner against the arrested role, votes against the plurality,
a true `was_tie` against the tally (a false one is the column's default: the study's runners never write it), the kill
against the roles) and lands invalid, with the reason, when they disagree.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mafiabench.errors import UserError
from mafiabench.importers.common import (
    ImportedGame,
    UnreadableGame,
    make_game_id,
    mini_mafia_day,
    mini_mafia_design,
    mini_mafia_ending,
    mini_mafia_investigation,
    mini_mafia_night,
    normalise_model,
    validity,
)
from mafiabench.record import GameRecord, PlayerRecord, Provenance, git_commit

SOURCE = "mini-mafia-sqlite"
VARIANT = "mini-mafia"
ROLES = ("detective", "mafioso", "villager")
REQUIRED_TABLES = ("games", "game_players", "game_sequence")
HUMAN = "human"


def default_study(path: Path | str) -> str:
    """The database's file name, `mini_mafia_round4.db`: each database holds one experiment (the study's README).
    The suffix stays so that `mini_mafia.db` and a folder of batches named `mini_mafia` (whose default study is the
    folder's name) land as two studies, not one merged study."""
    return Path(path).name or "mini-mafia.db"


def _connect(path: Path) -> sqlite3.Connection:
    try:
        con = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
        tables = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise UserError(f"{path}: not a readable SQLite database ({exc})") from None
    missing = [t for t in REQUIRED_TABLES if t not in tables]
    if missing:
        con.close()
        hint = " (the web game's database: `mafiabench import mini-mafia-web`)" if "game_actions" in tables else ""
        raise UserError(f"{path}: not a Mini-Mafia database: table(s) {', '.join(missing)} missing "
                        f"(expected the tables of database/schema.sql; found: {', '.join(sorted(tables)) or 'none'})"
                        f"{hint}")
    con.row_factory = sqlite3.Row
    return con


def _rows(con: sqlite3.Connection, sql: str, table: str) -> dict[str, list[dict[str, Any]]]:
    """Rows of `sql` grouped by game id ({} when the optional table is absent)."""
    present = con.execute("select 1 from sqlite_master where type = 'table' and name = ?", [table]).fetchone()
    out: dict[str, list[dict[str, Any]]] = {}
    if present:
        for r in con.execute(sql):
            out.setdefault(r["game_id"], []).append(dict(r))
    return out


def _agent(model: str) -> str:
    return "human/player" if model == HUMAN else model


def _model(row: dict[str, Any] | None) -> tuple[str, str] | None:
    """(canonical model, raw name) of a `players` row; a person is the model `human`, as every importer names one
    (their agent is `human/player`)."""
    if row is None or (row.get("model_name") is None and row.get("player_type") != "human"):
        return None
    if row.get("player_type") == "human":
        return HUMAN, str(row.get("model_name") or "human")
    raw = str(row["model_name"])
    return normalise_model(raw, row.get("model_provider")), raw


def read_mini_mafia_sqlite(path: Path | str, *, study: str | None = None,
                           total: Callable[[int], None] | None = None) -> Iterator[ImportedGame]:
    """Every game of one database, as games of one study (`study`, default: the file's stem); `total` hears how
    many."""
    db = Path(path)
    if db.is_dir():
        raise UserError(f"{db}: a directory; give the SQLite file (e.g. database/mini_mafia.db)")
    study = study or default_study(db)
    con = _connect(db)
    try:
        players = {r["player_id"]: dict(r) for r in con.execute("select * from players")} if con.execute(
            "select 1 from sqlite_master where name = 'players'").fetchone() else {}
        batches = {r["batch_id"]: dict(r) for r in con.execute("select batch_id, model_configs from batches")} \
            if con.execute("select 1 from sqlite_master where name = 'batches'").fetchone() else {}
        seats = _rows(con, "select game_id, player_id, character_name, role, final_status from game_players "
                           "order by game_id, character_name", "game_players")
        steps = _rows(con, "select game_id, step, action, actor, raw_response, parsed_result from game_sequence "
                           "order by game_id, step", "game_sequence")
        votes = _rows(con, "select game_id, character_name, role, voted_for, parsed_successfully from votes "
                           "order by game_id, character_name", "votes")
        cells = _rows(con, "select game_id, capability, background, target, count from benchmark", "benchmark")
        games = [dict(r) for r in con.execute("select game_id, timestamp, winner, was_tie, batch_id from games "
                                              "order by game_id")]
    finally:
        con.close()
    if total is not None:
        total(len(games))
    for game in games:
        gid = str(game["game_id"])
        rel = f"{db.name}#{gid}"
        try:
            yield build_record(game, seats.get(gid, []), steps.get(gid, []), votes.get(gid, []),
                               cells.get(gid, []), players, batches.get(game.get("batch_id")), study, rel)
        except ValueError as exc:
            yield UnreadableGame(SOURCE, rel, f"{rel}: {exc}")


def build_record(game: dict[str, Any], seats: list[dict[str, Any]], steps: list[dict[str, Any]],
                 vote_rows: list[dict[str, Any]], cells: list[dict[str, Any]], players: dict[Any, dict[str, Any]],
                 batch: dict[str, Any] | None, study: str, rel: str) -> GameRecord:
    """One game's rows → its record (ValueError when it cannot be one: no players, unknown roles)."""
    if not seats:
        raise ValueError("no rows in game_players")
    role_of = {s["character_name"]: s["role"] for s in seats}
    if sorted(Counter(role_of.values()).items()) != [("detective", 1), ("mafioso", 1), ("villager", 2)]:
        raise ValueError("game_players.role: expected 1 detective, 1 mafioso, 2 villagers, got "
                         f"{sorted(role_of.items())}")
    names = [s["character_name"] for s in seats]
    status = {s["character_name"]: s["final_status"] for s in seats}
    problems: list[str] = []

    # The model of each seat; the night victim may have no player row (it never played): its role's model.
    configs = json.loads(batch["model_configs"]) if batch and batch.get("model_configs") else {}
    model_of: dict[str, tuple[str, str] | None] = {s["character_name"]: _model(players.get(s["player_id"]))
                                                   for s in seats}
    by_role: dict[str, tuple[str, str]] = {}
    for name, m in model_of.items():
        if m is not None:
            by_role.setdefault(role_of[name], m)
    for role, cfg in configs.items():
        if role in ROLES and role not in by_role and isinstance(cfg, dict):
            raw = str(cfg.get("model") or cfg.get("model_path") or "")
            by_role[role] = (normalise_model(raw, cfg.get("type")), raw)
    for name in names:
        if model_of[name] is None:
            model_of[name] = by_role.get(role_of[name])
    unknown_model = sorted(n for n in names if model_of[n] is None and status[n] != "killed")
    if unknown_model:
        problems.append(f"no model recorded for {', '.join(unknown_model)}")

    mafioso = next(n for n in names if role_of[n] == "mafioso")
    detective = next(n for n in names if role_of[n] == "detective")
    killed = [n for n in names if status[n] == "killed"]
    arrested = [n for n in names if status[n] == "arrested"]
    kills = [s for s in steps if s["action"] == "kill"]
    investigations = [s for s in steps if s["action"] == "investigate"]
    talk = [s for s in steps if s["action"] == "discuss"]
    cast = [s for s in steps if s["action"] == "vote"]
    victim = kills[0]["parsed_result"] if kills else (killed[0] if len(killed) == 1 else None)
    if len(killed) != 1:
        problems.append(f"{len(killed)} players with final_status 'killed', expected 1")
    elif victim != killed[0]:
        problems.append(f"the kill step names {victim}, game_players says {killed[0]} was killed")
    if victim is not None and role_of.get(victim) != "villager":
        problems.append(f"the night victim {victim} is the {role_of.get(victim)}, not a villager")
    if kills and kills[0]["actor"] != mafioso:
        problems.append(f"the kill step's actor is {kills[0]['actor']}, the mafioso is {mafioso}")
    day = [n for n in names if n != victim]

    log = mini_mafia_night([(n, role_of[n]) for n in names], role_of, mafioso, victim)
    for inv in investigations[:1]:
        target = inv["parsed_result"]
        result = role_of.get(target)
        if result is None or inv["actor"] != detective:
            problems.append(f"investigate step: {inv['actor']} investigates {target!r}")
            continue
        mini_mafia_investigation(log, detective, target, result)
    random_vote = {v["character_name"]: not v["parsed_successfully"] for v in vote_rows}
    table_votes = {v["character_name"]: v["voted_for"] for v in vote_rows}
    counts, top = mini_mafia_day(log, talk, cast, day, random_vote, table_votes, problems)
    who = arrested[0] if len(arrested) == 1 else None
    if len(arrested) > 1:
        problems.append(f"{len(arrested)} players arrested, expected 1: {arrested}")
    if who is not None and counts and who not in top:
        problems.append(f"{who} was arrested without a plurality of the votes {counts}")
    # A true `was_tie` was written by someone; a false one is the column's default (`schema.sql`): no runner of the
    # study's code sets it (`db_utils.insert_game` takes no tie), so it says nothing about a tie.
    if game.get("was_tie") and cast and len(top) < 2:
        problems.append(f"games.was_tie is True, but the votes {counts} are not a tie")
    outcome = mini_mafia_ending(log, who, role_of[who] if who is not None else None, counts, top, role_of)
    if game.get("winner") is not None and outcome["winner"] is not None and game["winner"] != outcome["winner"]:
        problems.append(f"games.winner is {game['winner']}, but {who} (the {role_of[who]}) was arrested")

    reasons = []
    if problems:
        reasons.append("inconsistent tables")
    if not cast:
        reasons.append("no votes cast")
    if who is None:
        reasons.append("no winner recorded")

    roles_models = {r: m[0] for r, m in by_role.items()}
    design: dict[str, Any] = {"experiment": study, "batch_id": game.get("batch_id"), "game_index": None,
                              "agents": {r: m[1] for r, m in by_role.items()}}
    if set(roles_models) == set(ROLES):
        design.update(mini_mafia_design(roles_models))
    else:
        design.update({"cell": "unknown models", "capabilities": [], "target": None, "background": None})
    if cells:  # the benchmark table names the paper's cell; keep its own words beside ours
        design["benchmark"] = [{k: c[k] for k in ("capability", "target", "background", "count")} for c in cells]
        design["game_index"] = cells[0]["count"]
    rows_sha = hashlib.sha256(json.dumps([game, seats, steps, vote_rows], sort_keys=True, default=str)
                              .encode()).hexdigest()
    rounds = math.ceil(len(talk) / len(day)) if day else 0
    rules = {"discussion_rounds": rounds, "message_limit": None, "night": "scripted",
             "mafioso_knows_detective": None, "names": names}
    return GameRecord(
        game_id=make_game_id(SOURCE, str(game["game_id"])),
        variant=VARIANT,
        seed=None,
        rules=rules,
        players=[PlayerRecord(seat=None, name=n, role=role_of[n], agent=_agent((model_of[n] or ("unknown", ""))[0]),
                              model=(model_of[n] or ("unknown", ""))[0], model_raw=(model_of[n] or ("", ""))[1] or None)
                 for n in names],
        events=log.events,
        outcome=outcome,
        prompt=None,
        design=design,
        provenance=Provenance(git_commit=git_commit(), source=SOURCE, source_file=rel, source_sha256=rows_sha),
        validity=validity(reasons, problems or None),
    )

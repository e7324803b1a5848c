"""The Mini-Mafia web game's SQLite databases (people playing one seat against models) → `mini-mafia` game records.

The shape is what `mini-mafia-benchmark/web/web_interface.py` of bastoscostadavi/llm-mafia-game writes
(`init_database`, `save_game`): `database/mini_mafia_human.db` and its earlier copy `mini_mafia_human_old.db`.

- `games(game_id, timestamp, winner 'GOOD'|'EVIL', mafioso_name, detective_name, villager_name (the surviving
  villager), arrested_name, background_name, human_role)`; the earlier database has no `human_role` (its web game
  seated the person as the mafioso only: `setup_web_game.py` at `bd702106` and `cb2e819d`, "Students will play as
  MAFIOSO") and a `student_name`, which is never read: a person's name is not a game fact;
- `game_actions(game_id, step, action_type 'kill'|'investigate'|'discuss'|'vote', actor, raw_response,
  parsed_result)`: the game's `game_sequence` as the batch games log it (a choice made at random after a failed
  format is `"<name> (random)"`).

**Which models played is not recorded**: only the label the organiser gave the session (`background_name`). The
label is read as the web game's own setup reads it, and the record says so (`design.background`): a name
(`gpt-4.1-mini`) is the model of both other seats; `a+b` names them in the order `setup_web_game.py` writes (the
person mafioso: detective+villager; detective: mafioso+villager; villager: mafioso+detective); the first version's
`a_b` (detective_villager, lower case, spaces as `_`). Each name is the model `setup_web_game.py`'s `MODEL_CONFIGS`
calls for it in every version of the file, which is not always the label's: **`gpt-4.1-mini` calls
`gpt-4o-mini`**. One session overrides the setup: the configuration committed with the villager games
(`web/web_game_config.json` in `719b4100`, 2025-11-22 17:24 -0300, unchanged to `ffc027fe`) labels them
`gpt-5-mini` but calls `gpt-4o-mini` for the mafioso and the detective (`SESSIONS`). `model_raw` keeps the label.

The night is the benchmark's scripted one (the kill at random among the villagers, the detective investigating
the mafioso); the person sees the game's events and is asked for a message or a vote, and their message is
quoted for the parser (`WebHuman.generate`). Seats are not recorded (the four names are shuffled over the roles),
so none is invented; players are listed by name. The game id is the game's timestamp (to the microsecond), so
a game saved in both databases (nine are, with the session's label renamed) lands once. Every game is checked
(the winner against the arrested role, the arrest against the votes, the kill against the roles, one vote per
day player) and lands invalid, with the reason, when they disagree.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
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
    random_marked,
    validity,
)
from mafiabench.record import GameRecord, PlayerRecord, Provenance, git_commit

SOURCE = "mini-mafia-web"
VARIANT = "mini-mafia"
NAMES = ("Alice", "Bob", "Charlie", "Diana")
HUMAN_AGENT, HUMAN_MODEL = "human/web", "human"
GAME_COLUMNS = ("game_id", "timestamp", "winner", "mafioso_name", "detective_name", "villager_name",
                "arrested_name", "background_name")
ACTION_COLUMNS = ("action_id", "game_id", "step", "action_type", "actor", "raw_response", "parsed_result")
WINNERS = {"GOOD": "town", "EVIL": "mafia"}

# `setup_web_game.py`'s MODEL_CONFIGS, every version (`bd702106` spelled its names `GPT-4.1 Mini` ..., and the
# label lower-cased them with `_` for spaces): the label -> the model the web game called.
SETUP_MODELS = {
    "gpt-4.1-mini": "gpt-4o-mini", "gpt-4.1_mini": "gpt-4o-mini",
    "gpt-5-mini": "gpt-5-mini", "gpt-5_mini": "gpt-5-mini",
    "grok-3-mini": "grok-3-mini", "grok_3_mini": "grok-3-mini",
    "deepseek": "deepseek-chat", "deepseek_v3.1": "deepseek-chat",
    "mistral": "Mistral-7B-Instruct-v0.2-Q4_K_M.gguf", "mistral_7b_(local)": "Mistral-7B-Instruct-v0.2-Q4_K_M.gguf",
}
PROVIDERS = {"gpt-4o-mini": "openai", "gpt-5-mini": "openai"}
# The other two seats, in the order a two-name label gives them (setup_web_game.py at HEAD; `bd702106`: mafioso).
OTHERS = {"mafioso": ("detective", "villager"), "detective": ("mafioso", "villager"),
          "villager": ("mafioso", "detective")}
# Sessions whose committed configuration called other models than their label's: (person's role, label, day).
SESSIONS = {
    ("villager", "gpt-5-mini", "2025-11-22"): (
        {"mafioso": "gpt-4o-mini", "detective": "gpt-4o-mini"},
        "web/web_game_config.json as committed in 719b4100 (2025-11-22 17:24 -0300) and unchanged to ffc027fe: "
        "background_name 'gpt-5-mini', human_role 'villager', mafioso and detective model gpt-4o-mini"),
}


def default_study(path: Path | str) -> str:
    """The database's file name (`mini_mafia_human.db`), as for the study's other databases."""
    return Path(path).name or "mini-mafia-web.db"


def _connect(path: Path) -> tuple[sqlite3.Connection, bool]:
    """The database, read-only, and whether its games say the person's role (`human_role`)."""
    try:
        con = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
        columns = {t: {r[1] for r in con.execute(f"pragma table_info({t})")} for t in ("games", "game_actions")}
        tables = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise UserError(f"{path}: not a readable SQLite database ({exc})") from None
    for table, needed in (("games", GAME_COLUMNS), ("game_actions", ACTION_COLUMNS)):
        missing = [c for c in needed if c not in columns[table]]
        if missing:
            con.close()
            what = f"table {table} missing" if not columns[table] else f"{table}.{', '.join(missing)} missing"
            hint = " (a batch database: `mafiabench import mini-mafia-sqlite`)" if "game_players" in tables else ""
            raise UserError(f"{path}: not a Mini-Mafia web-game database: {what} (expected the tables of "
                            f"web/web_interface.py's init_database){hint}")
    con.row_factory = sqlite3.Row
    return con, "human_role" in columns["games"]


def read_mini_mafia_web(path: Path | str, *, study: str | None = None,
                        total: Callable[[int], None] | None = None) -> Iterator[ImportedGame]:
    """Every game of one web-game database, as games of one study (`study`, default: the file's name)."""
    db = Path(path)
    if db.is_dir():
        raise UserError(f"{db}: a directory; give the SQLite file (e.g. database/mini_mafia_human.db)")
    study = study or default_study(db)
    con, has_role = _connect(db)
    try:
        role_column = ", human_role" if has_role else ""
        games = [dict(r) for r in con.execute(f"select {', '.join(GAME_COLUMNS)}{role_column} from games "
                                              "order by game_id")]
        actions: dict[Any, list[dict[str, Any]]] = {}
        for r in con.execute(f"select {', '.join(ACTION_COLUMNS)} from game_actions order by game_id, action_id"):
            actions.setdefault(r["game_id"], []).append(dict(r))
    finally:
        con.close()
    if total is not None:
        total(len(games))
    for game in games:
        rel = f"{db.name}#{game['game_id']}"
        try:
            yield build_record(game, actions.get(game["game_id"], []), study, rel)
        except ValueError as exc:
            yield UnreadableGame(SOURCE, rel, f"{rel}: {exc}")


def background_models(role: str, label: str, day: str) -> tuple[dict[str, tuple[str, str]], str]:
    """The other two seats' (model, label it was read from), and how the label was read."""
    others = OTHERS[role]
    session = SESSIONS.get((role, label, day))
    if session is not None:
        models, evidence = session
        return {r: (normalise_model(models[r], PROVIDERS.get(models[r])), label) for r in others}, evidence
    if label in SETUP_MODELS:
        parts, how = [label, label], "one name: both other seats"
    elif "+" in label:
        parts, how = label.split("+", 1), f"two names: {' and '.join(others)}"
    else:
        splits = [(label[:i], label[i + 1:]) for i, ch in enumerate(label) if ch == "_"
                  and label[:i] in SETUP_MODELS and label[i + 1:] in SETUP_MODELS]
        if len(splits) != 1:
            raise ValueError(f"games.background_name {label!r}: not a name the web game's setup_web_game.py "
                             f"knows ({', '.join(sorted(SETUP_MODELS))}), nor two of them")
        parts, how = list(splits[0]), f"two names joined by '_': {' and '.join(others)}"
    out = {}
    for r, part in zip(others, parts, strict=True):
        raw = SETUP_MODELS.get(part)
        if raw is None:
            raise ValueError(f"games.background_name {label!r}: {part!r} is not a name setup_web_game.py knows "
                             f"({', '.join(sorted(SETUP_MODELS))})")
        out[r] = (normalise_model(raw, PROVIDERS.get(raw)), part)
    calls = ", ".join(f"{p} calls {SETUP_MODELS[p]}" for p in dict.fromkeys(parts))
    return out, f"the label read as setup_web_game.py reads it ({how}; MODEL_CONFIGS: {calls})"


def build_record(game: dict[str, Any], actions: list[dict[str, Any]], study: str, rel: str) -> GameRecord:
    """One game's rows → its record (ValueError when it cannot be one: names or roles that do not add up)."""
    mafioso, detective, villager = game["mafioso_name"], game["detective_name"], game["villager_name"]
    named = [mafioso, detective, villager]
    rest = [n for n in NAMES if n not in named]
    if len(set(named)) != 3 or len(rest) != 1:
        raise ValueError(f"games: mafioso {mafioso!r}, detective {detective!r}, villager {villager!r} are not "
                         f"three of {', '.join(NAMES)}")
    victim_by_roles = rest[0]
    role_of = {mafioso: "mafioso", detective: "detective", villager: "villager", victim_by_roles: "villager"}
    human_role = game.get("human_role") or "mafioso"
    if human_role not in OTHERS:
        raise ValueError(f"games.human_role {human_role!r}: expected mafioso, detective or villager")
    human = {"mafioso": mafioso, "detective": detective, "villager": villager}[human_role]
    label = str(game["background_name"] or "")
    models, evidence = background_models(human_role, label, str(game["timestamp"] or "")[:10])
    # The killed villager never played: web_interface.py gives it the villager seat's model (the detective's
    # when the person is the villager).
    models["villager"] = models.get("villager") or models["detective"]
    problems: list[str] = []

    rows = [{**a, "action": a["action_type"]} for a in actions]
    kills = [a for a in rows if a["action"] == "kill"]
    investigations = [a for a in rows if a["action"] == "investigate"]
    talk = [a for a in rows if a["action"] == "discuss"]
    cast = [a for a in rows if a["action"] == "vote"]
    other = sorted({a["action"] for a in rows} - {"kill", "investigate", "discuss", "vote"})
    if other:
        problems.append(f"game_actions.action_type {', '.join(map(repr, other))} unknown")
    victim = victim_by_roles
    if kills:
        killed, _ = random_marked(kills[0]["parsed_result"])
        if killed != victim_by_roles:
            problems.append(f"the kill step names {killed!r}, the games row leaves {victim_by_roles} as the victim")
        if kills[0]["actor"] != mafioso:
            problems.append(f"the kill step's actor is {kills[0]['actor']}, the mafioso is {mafioso}")
    else:
        problems.append("no kill step: the night is not recorded")
    day = [n for n in NAMES if n != victim]
    players = [(n, role_of[n]) for n in NAMES]
    log = mini_mafia_night(players, role_of, mafioso, victim)
    for inv in investigations[:1]:
        target, _ = random_marked(inv["parsed_result"])
        result = role_of.get(str(target))
        if result is None or inv["actor"] != detective:
            problems.append(f"investigate step: {inv['actor']} investigates {target!r}")
            continue
        mini_mafia_investigation(log, detective, str(target), result)
    counts, top = mini_mafia_day(log, talk, cast, day, {}, {}, problems)
    voters = [a["actor"] for a in cast]
    if sorted(voters) != sorted(day):
        problems.append(f"votes by {', '.join(voters) or 'nobody'}: expected one by each of {', '.join(day)}")
    spoke = [a["actor"] for a in talk]
    if any(spoke.count(n) != spoke.count(day[0]) for n in day):
        problems.append(f"messages per player {({n: spoke.count(n) for n in day})}: expected as many each")
    who = game["arrested_name"]
    if who is not None and who not in role_of:
        problems.append(f"games.arrested_name {who!r} is not a player")
        who = None
    if who is not None and counts and who not in top:
        problems.append(f"{who} was arrested without a plurality of the votes {counts}")
    outcome = mini_mafia_ending(log, who, role_of[who] if who is not None else None, counts, top, role_of)
    recorded = WINNERS.get(str(game["winner"]))
    if recorded is None and game["winner"] is not None:
        problems.append(f"games.winner {game['winner']!r}: expected GOOD or EVIL")
    elif recorded is not None and outcome["winner"] is not None and recorded != outcome["winner"]:
        problems.append(f"games.winner is {game['winner']}, but {who} (the {role_of[str(who)]}) was arrested")

    reasons = []
    if problems:
        reasons.append("inconsistent tables")
    if not cast:
        reasons.append("no votes cast")
    if who is None:
        reasons.append("no winner recorded")

    model_of = {r: (HUMAN_MODEL, None) if r == human_role else models[r] for r in OTHERS}
    design: dict[str, Any] = {"experiment": study, "batch_id": None, "game_index": None,
                              "agents": {r: HUMAN_AGENT if r == human_role else models[r][0] for r in OTHERS}}
    design.update(mini_mafia_design({r: m for r, (m, _) in model_of.items()}))
    design["background_label"] = label
    design["background_models"] = {r: m for r, (m, _) in models.items() if r != human_role}
    # The databases record a session's label only: each model seat's model is inferred from the web game's files.
    design["background_inferred"] = True
    design["inferred_players"] = [n for n in NAMES if n != human]  # every model's seat, both villagers' included
    design["background_read"] = f"inferred, not recorded: {evidence}"
    design["human_role"] = human_role
    design["human_role_recorded"] = "human_role" in game
    rows_sha = hashlib.sha256(json.dumps([game, actions], sort_keys=True, default=str).encode()).hexdigest()
    rules = {"discussion_rounds": 2, "message_limit": None, "night": "scripted", "mafioso_knows_detective": None,
             "names": list(NAMES), "interface": "web (web_interface.py): one person, two models"}

    def player(name: str) -> PlayerRecord:
        role = role_of[name]
        if name == human:
            return PlayerRecord(seat=None, name=name, role=role, agent=HUMAN_AGENT, model=HUMAN_MODEL)
        model, part = models[role]
        return PlayerRecord(seat=None, name=name, role=role, agent=model, model=model, model_raw=part)

    return GameRecord(
        game_id=make_game_id(SOURCE, str(game["timestamp"])),
        variant=VARIANT,
        seed=None,
        rules=rules,
        players=[player(n) for n in NAMES],
        events=log.events,
        outcome=outcome,
        prompt=None,
        design=design,
        provenance=Provenance(git_commit=git_commit(), source=SOURCE, source_file=rel, source_sha256=rows_sha),
        validity=validity(reasons, problems or None),
    )

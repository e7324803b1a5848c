"""Asynchronous Mafia games of the LLMafia tool ("Time to Talk", MIT licensed) → `async` game records.

One folder per game: `player_names.txt`, `mafia_names.txt`, `who_wins.txt`, `public_manager_chat.txt` (phase
announcements, eliminations with the revealed role), `public_daytime_chat.txt` and `public_nighttime_chat.txt`
(`[HH:MM:SS] Name: text` lines and `Game-Manager: A voted for B` lines), optional `config.json` (which players
are models, and which). Quirks, and what is done about each: clock times have no date and may wrap past
midnight (unwrapped, file by file, against the game's first announcement); stray backspace characters (applied
as the edits they were); the speaker's name repeated inside the text (dropped); aborted games (empty or missing
`who_wins.txt`: landed as unfinished, invalid "aborted"). Raw texts that were cleaned are kept in
`data.raw_text`. Human players' real names (`real_names.txt`, `config.json`) are never read into a record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mafiabench.importers.common import (
    AsyncPhase,
    FormatProblem,
    ImportedGame,
    Item,
    apply_backspaces,
    end_async_game,
    make_game_id,
    normalise_model,
    number_phases,
    read_game_folders,
    strip_speaker_prefix,
    validity,
)
from mafiabench.record import GameRecord, PlayerRecord, Provenance, git_commit

SOURCE = "llmafia"
VARIANT = "async"
MANAGER = "Game-Manager"
MANAGER_FILE = "public_manager_chat.txt"
DAY_FILE = "public_daytime_chat.txt"
NIGHT_FILE = "public_nighttime_chat.txt"
DAY = 86400

_LINE = re.compile(r"^\[(?P<h>\d{1,2}):(?P<m>\d{2}):(?P<s>\d{2})\] (?P<name>[^:]+?): ?(?P<text>.*)$", re.DOTALL)
_PHASE = re.compile(r"^Now it's (?P<kind>Daytime|Nighttime|Discussion Time)(?: for (?P<minutes>[\d.]+) minutes)?")
_OUT = re.compile(
    r"^(?P<name>.+?) was (?:voted out|eliminated)\. (?:Their role was|They were:) (?P<role>[\w-]+)\.?"
    r"(?: There are now (?P<left>\d+) mafia players? left\.?)?"
)
_VOTE = re.compile(r"^(?P<voter>.+?) voted for (?P<target>.+?)\.?$")
# Anonymous voting (config `anonymous_voting: true`, games/0002 on): no voter is named, only the tally, announced
# as `Voting results:` then one `Name: N vote(s)` line per player, at the second the elimination is announced.
_RESULTS = "Voting results:"
_TALLY = re.compile(r"^(?P<name>.+?): (?P<n>\d+) votes?$")
ROLE_WORDS = {"bystander": "bystander", "human": "bystander", "villager": "bystander",
              "mafia": "mafioso", "mafioso": "mafioso", "imposter": "mafioso", "impostor": "mafioso", "ai": "mafioso"}


@dataclass
class _Line:
    file: str
    raw_clock: int  # seconds since midnight, as written
    time: str  # "HH:MM:SS" as written
    name: str
    text: str
    raw_text: str
    index: int
    t: float = 0.0  # seconds since the game started, after unwrapping midnight


def _read_text(folder: Path, name: str, rel: str) -> str | None:
    path = folder / name
    if not path.exists():
        return None
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatProblem(f"{rel}/{name}: not UTF-8 ({exc})") from exc


def _names(text: str | None) -> list[str]:
    return [line.strip() for line in (text or "").split("\n") if line.strip()]


def _chat(text: str | None, file: str, rel: str, problems: list[str]) -> list[_Line]:
    """`[HH:MM:SS] Name: text` lines; a line without a stamp continues the previous message."""
    out: list[_Line] = []
    for i, raw in enumerate((text or "").split("\n")):
        raw = raw.rstrip("\r")
        if not raw.strip():
            continue
        m = _LINE.match(raw) or _LINE.match(apply_backspaces(raw))
        if m is None:
            if out:
                out[-1].raw_text += "\n" + raw
                out[-1].text += "\n" + apply_backspaces(raw)
            else:
                problems.append(f"{file} line {i + 1}: not a chat line: {raw!r:.80}")
            continue
        h, mi, s = int(m["h"]), int(m["m"]), int(m["s"])
        if h > 23 or mi > 59 or s > 59:
            raise FormatProblem(f"{rel}/{file} line {i + 1}: clock {m['h']}:{m['m']}:{m['s']} is not a time")
        name = apply_backspaces(m["name"]).strip()
        out.append(_Line(file, h * 3600 + mi * 60 + s, f"{h:02d}:{mi:02d}:{s:02d}", name,
                         apply_backspaces(m["text"]), m["text"], len(out)))
    return out


def _unwrap(lines: list[_Line], start: int) -> None:
    """Clock times carry no date: a time more than 12 hours before the previous one is the next day."""
    prev = start
    offset = 0
    for line in lines:
        t = line.raw_clock + offset
        while t < prev - DAY // 2:
            offset += DAY
            t += DAY
        line.t = float(t - start)
        prev = t


def _config(folder: Path, rel: str) -> dict[str, Any] | None:
    text = _read_text(folder, "config.json", rel)
    if text is None:
        return None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatProblem(f"{rel}/config.json: invalid JSON ({exc})") from exc
    if not isinstance(config, dict):
        raise FormatProblem(f"{rel}/config.json: expected a JSON object, got {type(config).__name__}")
    if not isinstance(config.get("players", []), list):
        raise FormatProblem(f"{rel}/config.json: field players must be a list, got {config['players']!r:.80}")
    return config


def _agents(config: dict[str, Any] | None, names: list[str], rel: str) -> dict[str, tuple[str, str, str | None]]:
    """name -> (agent, model, model_raw); only the model is read from a player's entry, never its real name."""
    out: dict[str, tuple[str, str, str | None]] = {n: ("unknown/participant", "unknown", None) for n in names}
    players = (config or {}).get("players") or []
    if not isinstance(players, list):
        raise FormatProblem(f"{rel}/config.json: field players must be a list, got {players!r:.80}")
    for i, p in enumerate(players):
        if not isinstance(p, dict) or p.get("name") not in out:
            continue
        if p.get("is_llm"):
            llm = p.get("llm_config") or {}
            raw = llm.get("model_name") if isinstance(llm, dict) else None
            if not isinstance(raw, str) or not raw.strip():
                raise FormatProblem(f"{rel}/config.json: players[{i}].llm_config.model_name is missing "
                                    f"(value {raw!r})")
            provider = "together" if llm.get("use_together") else llm.get("provider") or "local"
            model = normalise_model(raw, provider)
            out[p["name"]] = (model, model, raw)
        else:
            out[p["name"]] = ("human/participant", "human", None)
    return out


def _who_wins(text: str | None) -> tuple[str | None, bool]:
    """(winner, aborted): an empty or missing file means the game was aborted."""
    t = (text or "").strip().lower()
    if not t:
        return None, True
    if "mafia" in t or t.startswith("ai ") or "imposter" in t:
        return "mafia", False
    if "bystander" in t or "human" in t or "villager" in t:
        return "town", False
    return None, False


def build_record(folder: Path, rel: str, sha: str) -> GameRecord:
    problems: list[str] = []
    config = _config(folder, rel)
    names = _names(_read_text(folder, "player_names.txt", rel))
    cfg_players = [p for p in (config or {}).get("players") or [] if isinstance(p, dict) and p.get("name")]
    if not names:
        names = [str(p["name"]) for p in cfg_players]
    if not names:
        raise FormatProblem(f"{rel}/player_names.txt: missing or empty (and no players in config.json)")
    if len(set(names)) != len(names):
        raise FormatProblem(f"{rel}/player_names.txt: duplicate names {names}")
    mafia_text = _read_text(folder, "mafia_names.txt", rel)
    mafia = _names(mafia_text) if mafia_text is not None else [str(p["name"]) for p in cfg_players
                                                                 if p.get("is_mafia")]
    if mafia_text is None and not cfg_players:
        raise FormatProblem(f"{rel}/mafia_names.txt: missing (and no config.json saying who is mafia)")
    unknown = [m for m in mafia if m not in names]
    if unknown:
        raise FormatProblem(f"{rel}/mafia_names.txt: {unknown} not in player_names.txt {names}")
    manager_text = _read_text(folder, MANAGER_FILE, rel)
    if manager_text is None:
        raise FormatProblem(f"{rel}/{MANAGER_FILE}: missing")
    recorded, aborted = _who_wins(_read_text(folder, "who_wins.txt", rel))
    agents = _agents(config, names, rel)
    players = [(n, "mafioso" if n in mafia else "bystander") for n in names]
    role_of = dict(players)

    manager = _chat(manager_text, MANAGER_FILE, rel, problems)
    day = _chat(_read_text(folder, DAY_FILE, rel), DAY_FILE, rel, problems)
    night = _chat(_read_text(folder, NIGHT_FILE, rel), NIGHT_FILE, rel, problems)
    first = manager or day or night
    start = first[0].raw_clock if first else 0
    for lines in (manager, day, night):
        _unwrap(lines, start)

    # Phases and eliminations from the manager's announcements, in file order.
    phases: list[AsyncPhase] = []
    minutes: dict[str, float] = {}
    seq = 0
    pending_infos: list[Item] = []
    announced: dict[str, int] = {}  # a `Voting results:` tally in the manager chat, for the next elimination
    for line in manager:
        seq += 1
        data: dict[str, Any] = {"time": line.time}
        if (m := _PHASE.match(line.text)) and line.name == MANAGER:
            kind = "night" if m["kind"] == "Nighttime" else "day"
            if m["minutes"]:
                minutes.setdefault(kind, float(m["minutes"]))
            phases.append(AsyncPhase(kind=kind, round=0, t=line.t, data={"source_text": line.text}))
            phases[-1].items += pending_infos
            pending_infos = []
        elif (m := _OUT.match(line.text)) and line.name == MANAGER:
            name = m["name"].strip()
            role = ROLE_WORDS.get(m["role"].lower())
            if name not in role_of:
                problems.append(f"{MANAGER_FILE}: {name!r} eliminated but not a player")
                continue
            if role is not None and role != role_of[name]:
                problems.append(f"{MANAGER_FILE}: {name} revealed as {m['role']} but mafia_names.txt says "
                                f"{role_of[name]}")
            edata: dict[str, Any] = {**data, "source_text": line.text}
            if m["left"] is not None:
                edata["mafia_left"] = int(m["left"])
            if announced:
                edata["announced_votes"], announced = announced, {}
            item = Item(line.t, 2, seq, "elimination", target=name, data=edata)
            if phases:
                phases[-1].items.append(item)
            else:
                problems.append(f"{MANAGER_FILE}: elimination of {name} before any phase started")
        else:
            if line.name == MANAGER and line.text.startswith(_RESULTS):
                # games/0006 shape: `Voting results:` then `Summary:` and one indented `Name: N votes` per line
                for row in line.text.split("\n")[1:]:
                    if (t := _TALLY.match(row.strip())) and t["name"].strip() in role_of and int(t["n"]) > 0:
                        announced[t["name"].strip()] = int(t["n"])
            item = Item(line.t, 0, seq, "info", text=line.text, data=data)
            (phases[-1].items if phases else pending_infos).append(item)
    if not phases:
        if aborted:
            phases.append(AsyncPhase(kind="day", round=0, t=0.0, items=pending_infos))
        else:
            raise FormatProblem(f"{rel}/{MANAGER_FILE}: no phase announcement (\"Now it's Daytime ...\")")
    for ph, rnd in zip(phases, number_phases([p.kind for p in phases]), strict=True):
        ph.round = rnd

    # Chat lines join the latest phase of their kind that had started by then.
    for lines, kind, vis in ((day, "day", "public"), (night, "night", "team:mafia")):
        same = [p for p in phases if p.kind == kind]
        for line in lines:
            seq += 1
            if not same:
                problems.append(f"{line.file}: {kind} chat but no {kind} phase was announced")
                same = [phases[0]]
            ph = next((p for p in reversed(same) if p.t <= line.t), same[0])
            data = {"time": line.time}
            if line.name == MANAGER and (line.text == _RESULTS or _TALLY.match(line.text)):
                # The results of the vote that ended a phase, logged the same second the next phase starts.
                ended = [p for p in same if any(i.kind == "elimination" and i.t == line.t for i in p.items)]
                ph = ended[0] if ended else ph
                if (t := _TALLY.match(line.text)) and t["name"].strip() in role_of:
                    elim = next((i for i in ph.items if i.kind == "elimination" and i.t == line.t), None)
                    if elim is not None and int(t["n"]) > 0:
                        elim.data.setdefault("announced_votes", {})[t["name"].strip()] = int(t["n"])
                ph.items.append(Item(line.t, 0, seq, "info", text=line.text, visibility=vis, data=data))
                continue
            if line.name == MANAGER:
                if (v := _VOTE.match(line.text)) and v["voter"].strip() in role_of:
                    target = v["target"].strip()
                    if target not in role_of:
                        problems.append(f"{line.file}: {v['voter']} voted for an unknown player {target!r}")
                    ph.items.append(Item(line.t, 1, seq, "vote", actor=v["voter"].strip(), target=target,
                                         visibility=vis, data=data))
                else:
                    ph.items.append(Item(line.t, 0, seq, "info", text=line.text, visibility=vis, data=data))
                continue
            if line.name not in role_of:
                problems.append(f"{line.file}: message from {line.name!r}, who is not a player")
                ph.items.append(Item(line.t, 1, seq, "info", actor=None, text=f"{line.name}: {line.text}",
                                     visibility=vis, data={**data, "unattributed": True}))
                continue
            text = strip_speaker_prefix(line.text, line.name)
            if text != line.raw_text:
                data["raw_text"] = line.raw_text
            ph.items.append(Item(line.t, 1, seq, "message", actor=line.name, text=text, visibility=vis, data=data))

    end = end_async_game(VARIANT, players, phases, {"mafioso": len(mafia), "bystander": len(names) - len(mafia)},
                         recorded, problems, recorded_as=f"who_wins.txt says {recorded}", aborted=aborted)

    rules: dict[str, Any] = {"n_players": len(names), "n_mafia": len(mafia), "start": phases[0].kind,
                             "night_chat": True, "reveal_role": True}
    for kind, key, cfg_key in (("day", "day_seconds", "daytime_minutes"), ("night", "night_seconds",
                                                                           "nighttime_minutes")):
        value = (config or {}).get(cfg_key, minutes.get(kind))
        if isinstance(value, int | float) and not isinstance(value, bool):
            rules[key] = round(value * 60)
    models = sorted({agents[n][1] for n in names if agents[n][2] is not None})
    return GameRecord(
        game_id=make_game_id(SOURCE, f"{folder.name}-{sha[:12]}"),
        variant=VARIANT,
        seed=None,
        rules=rules,
        players=[PlayerRecord(seat=i, name=n, role=r, agent=agents[n][0], model=agents[n][1],
                              model_raw=agents[n][2]) for i, (n, r) in enumerate(players)],
        events=end.events,
        outcome=end.outcome,
        design={"experiment": SOURCE, "cell": f"n_players={len(names)};n_mafia={len(mafia)}",
                "game_index": int(folder.name) if folder.name.isdigit() else None, "capabilities": [],
                "target": models[0] if len(models) == 1 else None,
                "background": "human" if any(agents[n][1] == "human" for n in names) else None},
        provenance=Provenance(git_commit=git_commit(), source=SOURCE, source_file=rel, source_sha256=sha),
        validity=validity(end.reasons, end.details or None),
    )


def read_llmafia(path: Path | str, *, total: Callable[[int], None] | None = None) -> Iterator[ImportedGame]:
    """Every game folder under `path` (a folder of game folders, or one game folder); `total` hears how many."""
    return read_game_folders(path, SOURCE, (MANAGER_FILE, "player_names.txt"), build_record, total=total,
                             not_found=f"no LLMafia game folder found (expected folders holding {MANAGER_FILE} and "
                                       "player_names.txt)")

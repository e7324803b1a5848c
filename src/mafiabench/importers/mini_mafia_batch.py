"""Mini-Mafia benchmark batch folders (prompt versions v4.0 / v4.1) → `mini-mafia` game records.

A batch has no event table: each game file holds the four players' own memories, written by the reference
tool (`mini-mafia/mini_mafia.py` and `src/main.py` of bastoscostadavi/llm-mafia-game). The transcript is rebuilt
from one complete memory (an active, non-arrested player's, the only kind that holds the vote line), with `You`
mapped to that memory's owner, and cross-checked against every other memory: active players must have seen the
same messages, votes and arrest. The night victim's memory is, in the real batches, exactly its role line and
`Day 1 begins.` (`Night 1 begins.` and the death go to living players only; the day start goes to everyone); an
older shape, a prefix of the complete memory, is accepted too. The rebuilt log uses the simulator's event types,
texts, flags and data keys, so the same marts read both.

The batches list players in name order (Alice, Bob, Charlie, Diana) whatever their roles: there is no seat, so
none is invented (`seat` is None). An import is one study: every batch becomes a cell keyed by the model of each
role and the prompt version, and the batch id stays on each game (`design.batch_id`).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mafiabench.agents.agent import PlayerView
from mafiabench.agents.prompts import BATCH_CONFIG_WORDS, load_prompts, memory_lines
from mafiabench.engine.events import Event
from mafiabench.engine.mini_mafia import MiniMafiaRules
from mafiabench.errors import UserError
from mafiabench.importers.common import (
    FormatProblem,
    ImportedGame,
    UnreadableGame,
    make_game_id,
    mini_mafia_design,
    mini_mafia_ending,
    mini_mafia_investigation,
    mini_mafia_night,
    normalise_model,
    relative_name,
    sha256_chunks,
    source_base,
    tally,
    validity,
)
from mafiabench.record import GameRecord, PlayerRecord, Provenance, git_commit

SOURCE = "mini-mafia-batch"
VARIANT = "mini-mafia"
ROLES = ("detective", "mafioso", "villager")
RANDOM_VOTE = "(the vote was cast randomly because of a failed format)"
TRUNCATION = "..."
# `batch_<date>_<time>_v<version>`, with `_temp<t>` when the runner was given a temperature
# (mini-mafia/run_mini_mafia_batch.py builds `f"batch_{stamp}_v4.1{temp_suffix}"`).
_BATCH_DIR = re.compile(r"^batch_\d{8}_\d{6}_v(?P<version>\d+(?:\.\d+)*)(?:_temp(?P<temp>\d+(?:\.\d+)?))?$")
_GAME_FILE = re.compile(r"^game_(?P<n>\d+)\.json$")
_GAME_ID = re.compile(r"^(?P<batch>.+)_game_\d+$")


# -- memory lines ------------------------------------------------------------------------------------------------------

_ROLE = re.compile(r"^You're (?P<name>.+?), the (?P<role>\w+)\.?$")
_PHASE = re.compile(r"^(?P<phase>Night|Day) (?P<n>\d+) begins\.?$")
_DEATH = re.compile(r"^(?:Night \d+: )?(?:The (?:villager|detective|mafioso) )?(?P<name>.+?) was found dead\.?$")
_KILL = re.compile(r"^You killed (?P<name>.+?)\.?$")
_INVESTIGATE = re.compile(
    r"^You investigated (?P<name>.+?) and discovered that they are (?:the |a |an )?(?P<role>\w+)\.?$"
)
_KNOWS = re.compile(
    r"^(?:Beware, )?(?P<name>.+?) is the detective and (?:discovered|knows) (?:that )?you(?:'re| are) the mafioso\.?$"
)
_KNOWN = re.compile(r"^Beware, (?P<name>.+?) knows you're the detective\.?$")
_MESSAGE = re.compile(r'^(?P<speaker>[^:"]+): "(?P<text>.*)"$', re.DOTALL)
_SILENCE = re.compile(r"^(?P<speaker>[^:\"]+): remained silent\.?$")
_VOTE = re.compile(r"^(?P<voter>.+?) voted for (?P<target>.+?)(?P<random> " + re.escape(RANDOM_VOTE) + r")?$")
_ARREST = re.compile(r"^(?P<name>.+?) (?:was|were) arrested\.?$")

Token = tuple[Any, ...]
PUBLIC_KINDS = frozenset({"phase", "death", "message", "silence", "votes", "arrest"})


def parse_memory(lines: list[str], owner: str, names: set[str]) -> list[Token]:
    """One memory → tokens, with `You` mapped to `owner`. Lines naming no known player, or of no known shape,
    become `("info", line)` tokens: kept, never dropped."""

    def who(name: str) -> str | None:
        name = name.strip()
        if name == "You":
            return owner
        return name if name in names else None

    tokens: list[Token] = []
    for raw in lines:
        line = raw.strip()
        if m := _MESSAGE.match(line):
            speaker = who(m["speaker"])
            if speaker is not None:
                text = m["text"]
                truncated = text.endswith(TRUNCATION)
                tokens.append(("message", speaker, text[: -len(TRUNCATION)] if truncated else text, truncated))
                continue
        if (m := _SILENCE.match(line)) and (speaker := who(m["speaker"])) is not None:
            tokens.append(("silence", speaker))
        elif line.startswith("Votes:"):
            votes: list[tuple[str, str, bool]] = []
            for item in line[len("Votes:"):].strip().split(", "):
                v = _VOTE.match(item.strip())
                voter, target = (who(v["voter"]), who(v["target"])) if v else (None, None)
                if not v or voter is None or target is None:
                    votes = []
                    break
                votes.append((voter, target, bool(v["random"])))
            tokens.append(("votes", tuple(votes)) if votes else ("info", line))
        elif m := _PHASE.match(line):
            tokens.append(("phase", m["phase"].lower(), int(m["n"])))
        elif m := _ROLE.match(line):
            tokens.append(("role", who(m["name"]) or m["name"], m["role"].lower()))
        elif (m := _KILL.match(line)) and (name := who(m["name"])) is not None:
            tokens.append(("kill", name))
        elif (m := _DEATH.match(line)) and (name := who(m["name"])) is not None:
            tokens.append(("death", name))
        elif (m := _INVESTIGATE.match(line)) and (name := who(m["name"])) is not None:
            tokens.append(("investigate", name, m["role"].lower()))
        elif (m := _KNOWS.match(line)) and (name := who(m["name"])) is not None:
            tokens.append(("knows", name))
        elif (m := _KNOWN.match(line)) and (name := who(m["name"])) is not None:
            tokens.append(("known", name))
        elif (m := _ARREST.match(line)) and (name := who(m["name"])) is not None:
            tokens.append(("arrest", name))
        else:
            tokens.append(("info", line))
    return tokens


# -- batch configuration -----------------------------------------------------------------------------------------------


@dataclass
class Batch:
    """What a batch's `batch_config.json` says, already normalised."""

    folder: Path
    batch_id: str
    version: str | None
    message_limit: int | None
    prompt: dict[str, Any] | None
    models: dict[str, tuple[str, str]]  # role -> (canonical model, raw name)
    agents: dict[str, dict[str, Any]]  # role -> the non-secret part of its model config
    game_type: str | None = None
    design: dict[str, Any] = field(default_factory=dict)
    temperature: float | None = None  # from a `_temp<t>` folder suffix
    study: str | None = None  # the study this import is (default: the batch id)
    # Every batch id and folder name of the import this batch is read in: a game whose id names one of them is a
    # copy of that batch's game; one naming another batch is this folder's own (`build_record`).
    imported_batches: frozenset[str] = frozenset()


def _field(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise FormatProblem(f"{where}: field {key!r} is missing")
    return obj[key]


def read_batch_config(folder: Path, rel: str) -> Batch:
    try:
        config = json.loads((folder / "batch_config.json").read_bytes())
    except OSError as exc:
        raise FormatProblem(f"{rel}: cannot read ({exc.strerror or exc})") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatProblem(f"{rel}: invalid JSON ({exc})") from exc
    if not isinstance(config, dict):
        raise FormatProblem(f"{rel}: expected a JSON object, got {type(config).__name__}")
    model_configs = _field(config, "model_configs", rel)
    models: dict[str, tuple[str, str]] = {}
    agents: dict[str, dict[str, Any]] = {}
    for role in ROLES:
        cfg = _field(model_configs, role, f"{rel}: model_configs")
        raw = cfg.get("model") or cfg.get("model_path") or cfg.get("model_name") if isinstance(cfg, dict) else None
        if not isinstance(raw, str) or not raw.strip():
            raise FormatProblem(f"{rel}: field model_configs.{role}.model is missing or empty (value {cfg!r})")
        # v4.0 batches name local models by path (`/Users/.../models/mistral.gguf`): the file name is the model.
        if "model" not in cfg and ("/" in raw or "\\" in raw):
            raw = raw.replace("\\", "/").rsplit("/", 1)[-1]
        models[role] = (normalise_model(raw, cfg.get("type")), raw)
        agents[role] = {k: cfg[k] for k in ("type", "model", "temperature", "reasoning_effort", "n_ctx") if k in cfg}
        if "model_path" in cfg:
            agents[role]["model_file"] = raw
    prompt_config = config.get("prompt_config") or {}
    if not isinstance(prompt_config, dict):
        raise FormatProblem(f"{rel}: field prompt_config must be an object, got {prompt_config!r}")
    dir_match = _BATCH_DIR.match(folder.name)
    version = prompt_config.get("version") or (f"v{dir_match['version']}" if dir_match else None)
    limit = prompt_config.get("message_limit")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise FormatProblem(f"{rel}: field prompt_config.message_limit must be a positive integer, got {limit!r}")
    templates = prompt_config.get("templates")
    prompt = None
    if version is not None or templates is not None:
        sha = None
        if templates is not None:
            canonical = json.dumps(templates, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
            sha = sha256_chunks([canonical.encode()])
        prompt = {"version": version, "sha256": sha, "templates_sha256": sha}  # the reference's own code filled them
    batch_id = str(config.get("batch_id") or folder.name)
    by_role = {role: models[role][0] for role in ROLES}
    design = mini_mafia_design(by_role)
    if version is not None:
        design["cell"] = f"{design['cell']}|prompt={version}"
    return Batch(
        folder=folder,
        batch_id=batch_id,
        version=version,
        message_limit=limit,
        prompt=prompt,
        models=models,
        agents=agents,
        game_type=config.get("game_type"),
        design=design,
        temperature=float(dir_match["temp"]) if dir_match and dir_match["temp"] else None,
    )


# -- one game ----------------------------------------------------------------------------------------------------------


@dataclass
class _Seat:
    name: str
    role: str
    alive: bool
    imprisoned: bool
    tokens: list[Token]

    def public(self) -> list[Token]:
        return [t for t in self.tokens if t[0] in PUBLIC_KINDS]

    def first(self, kind: str) -> Token | None:
        return next((t for t in self.tokens if t[0] == kind), None)


def _seats(data: Any, rel: str) -> list[_Seat]:
    players = _field(data, "players", rel)
    if not isinstance(players, list) or len(players) != 4:
        raise FormatProblem(f"{rel}: field players must list 4 players, got {players!r:.80}")
    raw = []
    for i, p in enumerate(players):
        where = f"{rel}: players[{i}]"
        name, role, memory = _field(p, "name", where), _field(p, "role", where), p.get("memory", [])
        if not isinstance(name, str) or not name.strip():
            raise FormatProblem(f"{where}.name must be a non-empty string, got {name!r}")
        if role not in ROLES:
            raise FormatProblem(f"{where}.role must be one of {list(ROLES)}, got {role!r}")
        if not isinstance(memory, list) or not all(isinstance(line, str) for line in memory):
            raise FormatProblem(f"{where}.memory must be a list of strings")
        raw.append((name, role, bool(p.get("alive", True)), bool(p.get("imprisoned", False)), memory))
    names = {r[0] for r in raw}
    if len(names) != 4:
        raise FormatProblem(f"{rel}: player names must be distinct, got {[r[0] for r in raw]}")
    counts = Counter(r[1] for r in raw)
    if counts != Counter({"villager": 2, "detective": 1, "mafioso": 1}):
        raise FormatProblem(f"{rel}: roles must be 1 mafioso, 1 detective, 2 villagers, got {dict(counts)}")
    return [_Seat(n, r, a, imp, parse_memory(mem, n, names)) for n, r, a, imp, mem in raw]


def build_record(data: Any, batch: Batch, rel: str, sha: str, file_number: int | None) -> GameRecord:
    """One game file's JSON → its record (raises FormatProblem when it cannot be one)."""
    seats = _seats(data, rel)
    role_of = {s.name: s.role for s in seats}
    mafioso = next(s for s in seats if s.role == "mafioso")
    detective = next(s for s in seats if s.role == "detective")
    problems: list[str] = []

    victims = [s for s in seats if not s.alive and not s.imprisoned]
    victim: str | None = victims[0].name if len(victims) == 1 else None
    if len(victims) > 1:
        problems.append(f"{len(victims)} players dead at night, expected 1")
    if (kill := mafioso.first("kill")) is not None:
        if victim is not None and kill[1] != victim:
            problems.append(f"mafioso's memory says it killed {kill[1]}, but {victim} is the dead player")
        victim = victim or kill[1]
    day_players = [s for s in seats if s.name != victim]

    # The base: an active, non-arrested memory holding the vote line; else the longest day memory.
    complete = [s for s in day_players if s.first("votes") is not None]
    base = complete[0] if complete else max(day_players, key=lambda s: len(s.public()))
    public = base.public()
    talk = [t for t in public if t[0] in ("message", "silence")]
    for s in seats:
        role_line = s.first("role")
        if role_line is not None and (role_line[1] != s.name or role_line[2] != s.role):
            problems.append(f"{s.name}'s memory says it is {role_line[1]}, the {role_line[2]}")
        if s is base:
            continue
        mine = s.public()
        if s.name == victim:
            # The real shape: only `Day 1 begins.` (the day start is announced to every agent, dead or not);
            # an older shape stops early: a prefix of the complete memory.
            if mine not in ([("phase", "day", 1)], public[: len(mine)]):
                problems.append(f"the night victim {s.name}'s memory is neither `Day 1 begins.` alone nor a "
                                f"prefix of {base.name}'s")
            continue
        if [t for t in mine if t[0] in ("message", "silence")] != talk:
            problems.append(f"{s.name}'s messages differ from {base.name}'s")
        for kind in ("votes", "arrest", "death"):
            theirs, ours = s.first(kind), base.first(kind)
            if theirs is not None and theirs != ours:
                problems.append(f"{s.name}'s {kind} line differs from {base.name}'s")

    death = base.first("death")
    if death is not None and victim is not None and death[1] != victim:
        problems.append(f"memories say {death[1]} was found dead, but {victim} is the dead player")
    votes_token = base.first("votes")
    imprisoned = [s.name for s in seats if s.imprisoned]
    if len(imprisoned) > 1:
        problems.append(f"{len(imprisoned)} players arrested, expected 1: {imprisoned}")
    arrested = imprisoned[0] if imprisoned else None
    arrest_token = base.first("arrest")
    if arrest_token is not None:
        if arrested is not None and arrest_token[1] != arrested:
            problems.append(f"memories say {arrest_token[1]} was arrested, the players list says {arrested}")
        arrested = arrested or arrest_token[1]
    knows = mafioso.first("knows") or detective.first("known")
    names = [s.name for s in seats]

    log = mini_mafia_night([(s.name, s.role) for s in seats], role_of, mafioso.name, victim)
    if (inv := detective.first("investigate")) is not None:
        result = inv[2]
        if role_of.get(inv[1]) != result:
            problems.append(f"the detective learnt {inv[1]} is {result}, but {inv[1]} is {role_of.get(inv[1])}")
        mini_mafia_investigation(log, detective.name, inv[1], result)
    if knows is not None:
        log.emit("night", 1, "info", target=detective.name, visibility=f"player:{mafioso.name}",
                 text=f"{detective.name} is the detective and knows that you are the mafioso.",
                 data={"kind": "detective_known", "detective": detective.name})
    log.emit("day", 1, "phase_start", text="Day 1 begins.")
    active = len(day_players)
    for i, t in enumerate(talk):
        turn = {"discussion_round": i // active + 1}
        if t[0] == "message":
            log.emit("day", 1, "message", actor=t[1], text=t[2], truncated=t[3], data=turn)
        else:
            log.emit("day", 1, "silence", actor=t[1], text=f"{t[1]} remained silent.", format_failure=True,
                     random_fallback=True, data=turn)
    counts: dict[str, int] = {}
    top: list[str] = []
    if votes_token is not None:
        for voter, target, random_vote in votes_token[1]:
            log.emit("day", 1, "vote", actor=voter, target=target, format_failure=random_vote,
                     random_fallback=random_vote)
        counts, top = tally(t for _, t, _ in votes_token[1])
    if arrested is not None and counts and arrested not in top:
        problems.append(f"{arrested} was arrested without a plurality of the votes {counts}")
    outcome = mini_mafia_ending(log, arrested, role_of.get(arrested) if arrested is not None else None, counts, top,
                                role_of)
    unknown = [f"{s.name}'s memory has an unrecognised line: {t[1]!r:.120}" for s in seats for t in s.tokens
               if t[0] == "info"]

    # The game's own id names its batch (`<batch>_game_NNNN`). When that batch is part of this import too, the file
    # is a copy of one of its games: it lands invalid under this folder's id, never counted in this folder's cell
    # (whose models may not be the ones it was played with), and its original lands valid from its own folder. When
    # the batch it names is not imported (the published v4.1 release: 128 games whose ids name batches the release
    # does not hold, and no other file holds them), the game is this folder's, as the reference counts it: valid, in
    # this folder's cell, with the mismatch kept as a note and its own id in `design.source_game_id`.
    game_number = data.get("game_number", file_number)
    identity = str(data.get("game_id") or f"{batch.batch_id}_game_{file_number:04d}")
    home = _GAME_ID.match(identity)
    mismatch = home["batch"] if home is not None and home["batch"] not in (batch.batch_id, batch.folder.name) else None
    foreign = mismatch is not None and mismatch in batch.imported_batches
    notes: list[str] = []
    source_game_id = None
    if mismatch is not None:
        source_game_id = identity
        identity = f"{batch.batch_id}_game_{file_number:04d}"
        if foreign:
            problems.insert(0, f"the file's game_id {source_game_id!r} names batch {mismatch!r}, not this folder's "
                               f"{batch.folder.name!r}: a copy of a game of that batch (imported too), whose models "
                               "are not known here")
        else:
            notes.append(f"note: the file's game_id {source_game_id!r} names batch {mismatch!r}, not this folder's "
                         f"{batch.folder.name!r}; no batch of that name is in this import, so the game counts in "
                         "this folder's cell, as the reference counts it")

    reasons = []
    if foreign:
        reasons.append("game from another batch")
    if problems and not (foreign and len(problems) == 1):
        reasons.append("inconsistent memories")
    if unknown:
        reasons.append("unrecognised memory lines")
    problems += unknown
    if votes_token is None:
        reasons.append("no votes cast")
    if arrested is None:
        reasons.append("no winner recorded")

    rules = _rules(len(talk), active, batch.message_limit, knows is not None, names)
    design = {"experiment": batch.study or batch.batch_id, "cell": batch.design["cell"], "game_index": game_number,
              "batch_id": batch.batch_id,
              "capabilities": list(batch.design["capabilities"]), "target": batch.design["target"],
              "background": batch.design["background"], "agents": batch.agents}
    if batch.game_type is not None:
        design["game_type"] = batch.game_type
    if batch.temperature is not None:
        design["temperature"] = batch.temperature
    if source_game_id is not None:
        design["source_game_id"] = source_game_id
    return GameRecord(
        game_id=make_game_id(SOURCE, str(identity)),
        variant=VARIANT,
        seed=None,
        rules=rules,
        players=[PlayerRecord(seat=None, name=s.name, role=s.role, agent=batch.models[s.role][0],
                              model=batch.models[s.role][0], model_raw=batch.models[s.role][1])
                 for s in seats],
        events=log.events,
        outcome=outcome,
        prompt=batch.prompt,
        design=design,
        provenance=Provenance(git_commit=git_commit(), source=SOURCE, source_file=rel, source_sha256=sha),
        validity=validity(reasons, problems + notes or None),
    )


def _rules(messages: int, active: int, limit: int | None, knows: bool, names: list[str]) -> dict[str, Any]:
    """The simulator's rule dict: discussion rounds inferred (every active player speaks once a round)."""
    rounds = math.ceil(messages / active) if active else 0
    fields = {"discussion_rounds": rounds, "message_limit": limit, "night": "scripted",
              "mafioso_knows_detective": knows, "names": names}
    try:
        rules: dict[str, Any] = MiniMafiaRules.model_validate(fields).model_dump(mode="json")
        return rules
    except ValidationError:
        return fields


# -- reading a folder --------------------------------------------------------------------------------------------------


def _layout(root: Path) -> tuple[Path, list[tuple[Path, list[Path]]]]:
    """(base for source_file, [(batch folder, its game files)])."""
    if root.is_file():
        if not _GAME_FILE.match(root.name):
            raise UserError(f"{root}: not a Mini-Mafia game file (expected game_NNNN.json)")
        return root.parent.parent, [(root.parent, [root])]
    if (root / "batch_config.json").exists():
        folders = [root]
        base = source_base(root, root_is_unit=True)
    else:
        folders = sorted({p.parent for p in root.rglob("batch_config.json")}
                         | {p.parent for p in root.rglob("game_*.json") if _GAME_FILE.match(p.name)})
        base = root
    if not folders:
        raise UserError(f"{root}: no Mini-Mafia batch found (expected batch_*/ folders holding batch_config.json "
                        "and game_NNNN.json files)")
    return base, [(f, sorted(p for p in f.glob("game_*.json") if _GAME_FILE.match(p.name))) for f in folders]


def _batch_id(folder: Path) -> str:
    """A batch's id as its config gives it (its folder name when the config is unreadable or names none)."""
    try:
        config = json.loads((folder / "batch_config.json").read_bytes())
    except (OSError, ValueError):
        return folder.name
    return str(config.get("batch_id") or folder.name) if isinstance(config, dict) else folder.name


def default_study(path: Path | str) -> str:
    """The study an import is when none is named: the folder imported (for one game file, its batch's parent)."""
    root = Path(path).resolve()
    if root.is_file():
        root = root.parent.parent
    elif (root / "batch_config.json").exists():
        root = root.parent
    return root.name or "mini-mafia"


def read_mini_mafia(path: Path | str, *, study: str | None = None, total: Callable[[int], None] | None = None
                    ) -> Iterator[ImportedGame]:
    """Every game of every batch under `path` (a root of batches, one batch folder, or one game file), as games
    of one study (`study`, default: the name of the folder the batches sit in); `total` hears how many game files
    (a batch without any that cannot be read is one more)."""
    root = Path(path)
    base, batches = _layout(root)
    if total is not None:
        total(sum(len(games) for _, games in batches))
    study = study or default_study(root)
    imported = frozenset(_batch_id(folder) for folder, _ in batches) | frozenset(f.name for f, _ in batches)
    for folder, games in batches:
        batch: Batch | None = None
        problem: str | None = None
        try:
            batch = read_batch_config(folder, relative_name(folder / "batch_config.json", base))
            batch.study = study
            batch.imported_batches = imported
        except FormatProblem as exc:
            problem = str(exc)
        if not games and problem:
            yield UnreadableGame(SOURCE, relative_name(folder, base), problem)
        for game_path in games:
            rel = relative_name(game_path, base)
            if batch is None:
                yield UnreadableGame(SOURCE, rel, problem or "batch_config.json is unreadable")
                continue
            yield read_game_file(game_path, batch, rel)


def read_game_file(game_path: Path, batch: Batch, rel: str) -> ImportedGame:
    match = _GAME_FILE.match(game_path.name)
    number = int(match["n"]) if match else None
    try:
        raw = game_path.read_bytes()
    except OSError as exc:
        return UnreadableGame(SOURCE, rel, f"{rel}: cannot read ({exc.strerror or exc})")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return UnreadableGame(SOURCE, rel, f"{rel}: invalid JSON ({exc})")
    if not isinstance(data, dict):
        return UnreadableGame(SOURCE, rel, f"{rel}: expected a JSON object, got {type(data).__name__}")
    try:
        return build_record(data, batch, rel, sha256_chunks([raw]), number)
    except FormatProblem as exc:
        return UnreadableGame(SOURCE, rel, str(exc))


# -- writing the format (benchmarks, round-trip tests) ----------------------------------------------------------------


def to_batch_game(record: GameRecord, batch_id: str, game_number: int) -> dict[str, Any]:
    """A simulated Mini-Mafia record in the batch format, for benchmarks and round-trip tests of the importer.

    Memories are the lines our own prompts show (`agents.prompts.memory_lines` with the reference's words), cut as
    the reference tool cuts them: the night victim's memory stops before its death, the arrested player's has no vote
    line.
    """
    team = {p.name: p.team for p in record.players}
    victim = next((e.target for e in record.events if e.type == "kill"), None)
    arrested = next((e.target for e in record.events if e.type == "elimination"), None)
    names = tuple(p.name for p in record.players)
    players = []
    for p in record.players:
        seen: list[Event] = []
        for e in record.events:
            if not e.visible_to(p.name, team[p.name]):
                continue
            if p.name == victim and e.type in ("kill", "death"):
                break
            if p.name == arrested and e.type in ("vote", "elimination"):
                continue
            seen.append(e)
        if p.name == victim:
            # As the reference tool writes it: the role line, then the day start every agent is told.
            seen = [e for e in seen if e.type == "role_assigned"] + [
                e for e in record.events if e.type == "phase_start" and e.phase == "day"][:1]
        view = PlayerView(p.name, p.role, p.team, "mini-mafia", MiniMafiaRules(), names, tuple(seen))
        memory = [_named_votes(line, p.name) for line in memory_lines(view, load_prompts(*BATCH_CONFIG_WORDS))]
        players.append({"name": p.name, "role": p.role, "alive": p.name != victim,
                        "imprisoned": p.name == arrested, "memory": memory})
    return {"game_id": f"{batch_id}_game_{game_number:04d}", "game_number": game_number,
            "timestamp": "2025-01-01T00:00:00", "players": players}


def _named_votes(line: str, me: str) -> str:
    """The reference tool's vote line names every voter (`Alice voted for Bob`), the memory's owner included."""
    if not line.startswith("Votes: "):
        return line
    items = line[len("Votes: "):].split(", ")
    return "Votes: " + ", ".join(me + i[len("You"):] if i.startswith("You voted for ") else i for i in items)


def models_by_role(model_configs: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Canonical model per role from a batch's `model_configs` (what `mini_mafia_design` takes)."""
    return {role: normalise_model(str(c.get("model") or c.get("model_path") or ""), c.get("type"))
            for role, c in model_configs.items()}

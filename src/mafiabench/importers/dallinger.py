"""Human games of Ibraheem, Zhou & DeNero (NAACL 2022), a Dallinger export → `async` game records.

One folder per game (`node.csv`, `info.csv`, `network.csv`). The export's quirks, and what is done about each:
rows are not in time order (sorted by time, then id); games start at night and the mafia's night chat sits in the
same table, so the phase is tracked from the phase-change rows, and repeated phase-change rows collapse into one;
`failed` on a message marks an author eliminated later, so it filters nothing; eliminations come from each node's
death time (the `Victim - X` suffix of phase-change rows is sometimes stale), matched to the phase change it
caused; a failed node with a death time is a participant who dropped out; phases may end with no votes and no
elimination; the winner may be missing; a few games have 5 players and 1 mafioso.

Validity follows the study that compared humans to LLMs: a game is valid when no technical failure happened, a
winner was recorded and every phase was played with votes cast.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from mafiabench.importers.common import (
    AsyncPhase,
    FormatProblem,
    ImportedGame,
    Item,
    end_async_game,
    make_game_id,
    number_phases,
    read_game_folders,
    strip_speaker_prefix,
    validity,
)
from mafiabench.record import GameRecord, PlayerRecord, Provenance, git_commit

SOURCE = "ibraheem2022-human"
VARIANT = "async"
ROLE_OF_TYPE = {"mafioso": "mafioso", "bystander": "bystander"}
_PHASE_CHANGE = re.compile(r"^Phase Change to (?P<kind>Daytime|Nighttime)(?::\s*Victim - (?P<victim>.*))?\s*$")
_TRUE = {"true", "t", "1", "yes", "y"}
_FALSE = {"false", "f", "0", "no", "n", ""}
DEATH_MATCH_SECONDS = 10.0
# The protocol of the studies that use these games (Hidden in Plain Text: 7-12 players, its detector names two
# mafiosos); a game outside it is landed, invalid with this reason.
PROTOCOL_PLAYERS = (7, 12)
PROTOCOL_MAFIA = 2
OUTSIDE_PROTOCOL = "outside the study's protocol"


def _bool(value: str | None, where: str) -> bool:
    v = (value or "").strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise FormatProblem(f"{where}: expected a boolean, got {value!r}")


def _time(value: str | None, where: str) -> datetime | None:
    v = (value or "").strip()
    if not v:
        return None
    try:
        t = datetime.fromisoformat(v)
    except ValueError as exc:
        raise FormatProblem(f"{where}: expected a timestamp, got {value!r}") from exc
    return t.replace(tzinfo=None) if t.tzinfo else t


def _rows(folder: Path, name: str, rel: str, required: tuple[str, ...]) -> list[dict[str, str]]:
    try:
        text = (folder / name).read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise FormatProblem(f"{rel}/{name}: cannot read ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise FormatProblem(f"{rel}/{name}: not UTF-8 ({exc})") from exc
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    missing = [c for c in required if c not in (reader.fieldnames or [])]
    if missing:
        raise FormatProblem(f"{rel}/{name}: column(s) {missing} missing (header: {reader.fieldnames})")
    try:
        rows = list(reader)
    except csv.Error as exc:  # e.g. a quoted field never closed: the file was cut
        raise FormatProblem(f"{rel}/{name}: line {reader.line_num}: {exc} (the file looks cut)") from exc
    # A row with fewer fields than the header, or a last row without its newline: the export was cut mid-row.
    short = next((r for r in rows if None in r.values() or None in r), None)
    if short is not None or (rows and not text.endswith(("\n", "\r"))):
        last = short or rows[-1]
        raise FormatProblem(
            f"{rel}/{name}: cut mid-row (row id={last.get('id')!r} has {sum(v is not None for v in last.values())} "
            f"of {len(reader.fieldnames or [])} fields, or the file does not end with a newline)"
        )
    return rows


@dataclass
class _Node:
    id: str
    name: str
    role: str
    alive: bool
    death: datetime | None
    failed: bool
    failed_at: datetime | None
    created: datetime | None = None


def _nodes(folder: Path, rel: str) -> list[_Node]:
    nodes = []
    for row in _rows(folder, "node.csv", rel, ("id", "property1", "property2", "property3", "type")):
        where = f"{rel}/node.csv row id={row.get('id')}"
        kind = (row.get("type") or "").strip()
        if kind == "source":
            continue
        if kind not in ROLE_OF_TYPE:
            raise FormatProblem(f"{where}: field type must be source, mafioso or bystander, got {kind!r}")
        name = (row.get("property1") or "").strip()
        if not name:
            raise FormatProblem(f"{where}: field property1 (the player's name) is empty")
        alive = _bool(row.get("property2"), f"{where}: field property2") if (row.get("property2") or "").strip() \
            else True
        nodes.append(_Node(
            id=str(row["id"]).strip(),
            name=name,
            role=ROLE_OF_TYPE[kind],
            alive=alive,
            death=_time(row.get("property3"), f"{where}: field property3"),
            failed=_bool(row.get("failed"), f"{where}: field failed"),
            failed_at=_time(row.get("time_of_death"), f"{where}: field time_of_death"),
            created=_time(row.get("creation_time"), f"{where}: field creation_time"),
        ))
    nodes.sort(key=lambda n: (int(n.id) if n.id.isdigit() else 0, n.id))
    if not nodes:
        raise FormatProblem(f"{rel}/node.csv: no players (every row is the source node)")
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise FormatProblem(f"{rel}/node.csv: duplicate player names {sorted(n for n in names if names.count(n) > 1)}")
    return nodes


def _winner(folder: Path, rel: str) -> tuple[str | None, list[str]]:
    if not (folder / "network.csv").exists():
        return None, ["network.csv is missing"]
    rows = _rows(folder, "network.csv", rel, ("property2",))
    raw = (rows[0].get("property2") or "").strip().lower() if rows else ""
    if raw in ("", "none", "null"):
        return None, []
    if raw in ("mafia", "mafioso", "mafiosi"):
        return "mafia", []
    if raw in ("bystanders", "bystander", "town"):
        return "town", []
    raise FormatProblem(f"{rel}/network.csv: field property2 must be mafia or bystanders, got {raw!r}")


def _game_over_at(nodes: list[_Node], recorded: str | None) -> datetime | None:
    """When the game was decided: the last elimination of a game with a recorded winner (None if unfinished)."""
    deaths = [n.death for n in nodes if n.death is not None]
    return max(deaths) if recorded is not None and deaths else None


def build_record(folder: Path, rel: str, sha: str) -> GameRecord:
    nodes = _nodes(folder, rel)
    recorded, notes = _winner(folder, rel)
    over_at = _game_over_at(nodes, recorded)
    # Nodes created after the game was decided (the waiting room let people in after the end) never played.
    late = [n for n in nodes if over_at is not None and n.created is not None and n.created > over_at]
    nodes = [n for n in nodes if n not in late]
    remarks = [f"{n.name} joined after the game had ended: not a player" for n in late]
    name_of = {n.id: n.name for n in nodes}
    names = [n.name for n in nodes]
    rows = []
    for row in _rows(folder, "info.csv", rel, ("id", "creation_time", "type", "origin_id", "contents")):
        where = f"{rel}/info.csv row id={row.get('id')}"
        t = _time(row.get("creation_time"), f"{where}: field creation_time")
        if t is None:
            raise FormatProblem(f"{where}: field creation_time is empty")
        row_id = (row.get("id") or "").strip()
        rows.append((t, int(row_id) if row_id.isdigit() else 0, row))
    rows.sort(key=lambda r: (r[0], r[1]))
    problems = list(notes)
    if not rows:
        raise FormatProblem(f"{rel}/info.csv: no rows")
    start = rows[0][0]

    def secs(t: datetime) -> float:
        return (t - start).total_seconds()

    # Phases from the phase-change rows (games start at night; repeats of the current phase collapse).
    kinds = ["night"]
    starts = [start]
    texts: list[str | None] = [None]
    repeated: set[int] = set()  # row ids of phase-change rows that repeat the phase already running
    seen_start = False
    for t, rid, row in rows:
        if (row.get("type") or "").strip() != "info":
            continue
        m = _PHASE_CHANGE.match((row.get("contents") or "").strip())
        if m is None:
            continue
        kind = "day" if m["kind"] == "Daytime" else "night"
        if kind == kinds[-1]:
            if len(kinds) > 1 or seen_start:  # the first night row starts the game; later ones repeat it
                repeated.add(rid)
            seen_start = True
            continue
        kinds.append(kind)
        starts.append(t)
        texts.append((row.get("contents") or "").strip())
    rounds = number_phases(kinds)
    phases = [AsyncPhase(kind=k, round=r, t=secs(s), data={"source_text": x} if x else {})
              for k, r, s, x in zip(kinds, rounds, starts, texts, strict=True)]

    def phase_at(t: datetime) -> AsyncPhase:
        i = max(j for j, s in enumerate(starts) if s <= t) if t >= starts[0] else 0
        return phases[i]

    seq = 0
    for t, rid, row in rows:
        seq += 1
        kind = (row.get("type") or "").strip()
        contents = row.get("contents") or ""
        ph = phase_at(t)
        data: dict[str, Any] = {"time": row.get("creation_time", "").strip()}
        if kind == "info":
            if _PHASE_CHANGE.match(contents.strip()):
                if rid in repeated:  # kept, flagged: a phase changes once
                    ph.items.append(Item(secs(t), 0, seq, "info", text=contents,
                                         data={**data, "flag": "repeated_phase_change"}))
                continue
            ph.items.append(Item(secs(t), 0, seq, "info", text=contents, data=data))
            continue
        origin = (row.get("origin_id") or "").strip()
        speaker = name_of.get(origin) or next((n for n in names if contents.startswith(n + ": ")), None)
        if speaker is None or kind not in ("text", "vote"):
            problems.append(f"info.csv row id={rid}: {kind} from unknown origin {origin!r}: {contents!r:.80}")
            ph.items.append(Item(secs(t), 1, seq, "info", text=contents, data={**data, "unattributed": True}))
            continue
        body = strip_speaker_prefix(contents, speaker)
        vis = "team:mafia" if ph.kind == "night" else "public"
        if kind == "text":
            ph.items.append(Item(secs(t), 1, seq, "message", actor=speaker, text=body, visibility=vis, data=data))
        else:
            target = body.strip()
            if target not in names:
                problems.append(f"info.csv row id={rid}: {speaker} voted for an unknown player {target!r}")
            ph.items.append(Item(secs(t), 1, seq, "vote", actor=speaker, target=target, visibility=vis, data=data))

    # Eliminations from node death times, each matched to the phase change it caused; dropouts from failed nodes.
    ended: dict[int, str] = {}
    phase_of_death: dict[str, int] = {}
    for n in sorted((n for n in nodes if n.death is not None), key=lambda n: n.death or start):
        assert n.death is not None
        near = [(abs((starts[i] - n.death).total_seconds()), i) for i in range(1, len(starts))]
        near = [c for c in near if c[0] <= DEATH_MATCH_SECONDS]
        index = min(near)[1] - 1 if near else phases.index(phase_at(n.death))
        if index in ended:
            problems.append(f"{n.name} and {ended[index]} both eliminated in {phases[index].kind} "
                            f"{phases[index].round}")
        ended[index] = n.name
        phase_of_death[n.name] = index
        t_end = max(secs(n.death), phases[index].t)
        phases[index].items.append(Item(t_end, 2, seq + 1, "elimination", target=n.name,
                                        data={"time": n.death.isoformat(sep=" ")}))
    for n in nodes:
        if not n.alive and n.death is None:
            problems.append(f"{n.name} is marked not alive but has no elimination time")
        if n.failed and n.failed_at is None:
            problems.append(f"{n.name}'s node failed (dropped out) at an unknown time")
        if n.failed and n.failed_at is not None and (n.death is None or n.failed_at < n.death):
            if over_at is not None and n.failed_at >= over_at:
                remarks.append(f"{n.name}'s node failed after the game had ended: not a dropout")
                continue
            ph = phase_at(n.failed_at)
            drop: dict[str, Any] = {"time": n.failed_at.isoformat(sep=" ")}
            if phase_of_death.get(n.name) == phases.index(ph):
                drop["flag"] = "dropout_before_elimination"
                remarks.append(f"{n.name} dropped out in {ph.kind} {ph.round} and was eliminated in that phase "
                               "anyway: play did not change")
            else:
                problems.append(f"{n.name} dropped out of the game in {ph.kind} {ph.round}")
            ph.items.append(Item(secs(n.failed_at), 1, seq + 2, "dropout", actor=n.name, data=drop))

    players = [(n.name, n.role) for n in nodes]
    n_mafia = sum(1 for _, r in players if r == "mafioso")
    end = end_async_game(VARIANT, players, phases, {"mafioso": n_mafia, "bystander": len(players) - n_mafia},
                         recorded, problems, recorded_as=f"recorded winner {recorded}")
    n_players = len(players)
    reasons, details, without = end.reasons, end.details, end.without
    if not PROTOCOL_PLAYERS[0] <= n_players <= PROTOCOL_PLAYERS[1] or n_mafia != PROTOCOL_MAFIA:
        reasons.append(OUTSIDE_PROTOCOL)
        details.append(f"{n_players} players and {n_mafia} mafioso{'s' if n_mafia != 1 else ''} (the study's "
                       f"games have {PROTOCOL_PLAYERS[0]}-{PROTOCOL_PLAYERS[1]} players and {PROTOCOL_MAFIA} "
                       "mafiosos)")
    verdict = validity(reasons, details or None)
    if reasons == ["no votes cast"] and all(p.startswith("night") for p in without):
        # The export cannot tell a mafia that chose not to kill from one that stopped playing: say so.
        verdict["undecided"] = (f"no mafia vote in {', '.join(without)}: a choice not to kill or players not "
                                "playing; the export cannot tell (pin the game list to decide)")
    if remarks:
        verdict["notes"] = remarks
    return GameRecord(
        game_id=make_game_id(SOURCE, folder.name.removesuffix("-data")),
        variant=VARIANT,
        seed=None,
        rules={"n_players": n_players, "n_mafia": n_mafia, "start": "night", "night_chat": True, "reveal_role": True},
        players=[PlayerRecord(seat=i, name=name, role=role, agent="human/participant", model="human")
                 for i, (name, role) in enumerate(players)],
        events=end.events,
        outcome=end.outcome,
        design={"experiment": SOURCE, "cell": f"n_players={n_players};n_mafia={n_mafia}", "game_index": None,
                "capabilities": [], "target": None, "background": "human"},
        provenance=Provenance(git_commit=git_commit(), source=SOURCE, source_file=rel, source_sha256=sha),
        validity=verdict,
    )


def read_dallinger(path: Path | str, *, total: Callable[[int], None] | None = None) -> Iterator[ImportedGame]:
    """Every game folder under `path` (a folder of game folders, or one game folder); `total` hears how many."""
    return read_game_folders(path, SOURCE, ("info.csv", "node.csv"), build_record, required=("node.csv", "info.csv"),
                             total=total,
                             not_found="no Dallinger game folder found (expected folders holding node.csv, info.csv "
                                       "and network.csv)")

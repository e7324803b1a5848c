"""What every importer shares: the item type readers yield, the import report and driver, model-name
normalisation, the Mini-Mafia design derivation, and small helpers that keep imported records shaped exactly
like simulated ones (sequential events, clocks, deterministic ids, checksums).

Readers are pure (path in, records out); only `run_import` touches the warehouse, through
`warehouse.load_records`, so importing twice is idempotent by game id.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mafiabench.agents.parsing import parse_message_reference, parse_name_reference
from mafiabench.engine.core import ROLE_TEAM
from mafiabench.engine.events import PUBLIC, Event, Phase
from mafiabench.errors import UserError, printable
from mafiabench.record import GameRecord, write_record_atomic

# -- what readers yield ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UnreadableGame:
    """A game that could not be made into a record at all (unreadable file, missing field): listed in the
    report with the reason, never dropped silently."""

    source: str
    source_file: str
    reason: str


ImportedGame = GameRecord | UnreadableGame


class FormatProblem(ValueError):
    """A file or folder that cannot become a record; the message names the file, row or field, and the value."""

Reader = Callable[..., Iterator[ImportedGame]]

# format name -> (module, reader function, source name); modules are imported lazily (no import cycle).
FORMATS: dict[str, tuple[str, str, str]] = {
    "mini-mafia": ("mafiabench.importers.mini_mafia_batch", "read_mini_mafia", "mini-mafia-batch"),
    "mini-mafia-sqlite": ("mafiabench.importers.mini_mafia_sqlite", "read_mini_mafia_sqlite", "mini-mafia-sqlite"),
    "mini-mafia-web": ("mafiabench.importers.mini_mafia_web", "read_mini_mafia_web", "mini-mafia-web"),
    "dallinger": ("mafiabench.importers.dallinger", "read_dallinger", "ibraheem2022-human"),
    "llmafia": ("mafiabench.importers.llmafia", "read_llmafia", "llmafia"),
}

STUDY_FORMATS = frozenset({"mini-mafia", "mini-mafia-sqlite", "mini-mafia-web"})


def reader_for(fmt: str) -> Reader:
    if fmt not in FORMATS:
        raise UserError(f"unknown import format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    module, func, _ = FORMATS[fmt]
    reader: Reader = getattr(importlib.import_module(module), func)
    return reader


# -- the report and the driver ---------------------------------------------------------------------------------------


@dataclass
class ImportReport:
    """What an import did: every game read is accounted for as landed, skipped (already present) or unreadable;
    invalid games are landed (with their validity flag) and also counted here by reason."""

    format: str
    path: str
    games_read: int = 0
    landed: int = 0
    replaced: int = 0
    skipped: int = 0
    valid: int = 0
    invalid: dict[str, int] = field(default_factory=dict)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    studies: dict[str, int] = field(default_factory=dict)  # games per study (design.experiment)
    # Events landed with a quirk flag (`data.flag`: a vote after the voter's elimination, a message from an
    # eliminated player, a repeated phase change): kept in the log, counted by no tally.
    flags: dict[str, int] = field(default_factory=dict)
    # Games whose verdict the validity rules cannot settle from the export (`validity.undecided`): landed with the
    # verdict the rules give, listed so a study can pin its own game list.
    undecided: list[tuple[str, str]] = field(default_factory=list)
    # What the rules decided and a reader should know (`validity.notes`: a node that failed after the end, ...).
    notes: list[tuple[str, str]] = field(default_factory=list)
    # Positions of the source's seat order that give the role away (warehouse.listing_leaks): the detector lists
    # players in a seeded shuffle, but prompts or pages in seat order would show it.
    leaks: list[str] = field(default_factory=list)

    @property
    def records(self) -> int:
        return self.games_read - len(self.unreadable)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "path": self.path,
            "games_read": self.games_read,
            "landed": self.landed,
            "replaced": self.replaced,
            "skipped": self.skipped,
            "valid": self.valid,
            "invalid": dict(sorted(self.invalid.items())),
            "unreadable": [{"file": f, "reason": r} for f, r in self.unreadable],
            "studies": dict(sorted(self.studies.items())),
            "flagged_events": dict(sorted(self.flags.items())),
            "undecided": [{"file": f, "why": w} for f, w in self.undecided],
            "notes": [{"file": f, "note": n} for f, n in self.notes],
            "listing_leaks": list(self.leaks),
            "seconds": round(self.seconds, 3),
        }

    def to_text(self) -> str:
        lines = [
            f"import {self.format} from {self.path}: {self.games_read} games read in {self.seconds:.1f} s",
            f"  landed: {self.landed}" + (f" ({self.replaced} replacing failed games)" if self.replaced else ""),
            f"  skipped (already in the warehouse): {self.skipped}",
            f"  valid: {self.valid}",
            f"  invalid (landed with a validity flag): {sum(self.invalid.values())}",
        ]
        lines += [f"    {reason}: {n}" for reason, n in sorted(self.invalid.items())]
        lines.append(f"  flagged events (landed, counted by no tally): {sum(self.flags.values())}")
        lines += [f"    {flag}: {n}" for flag, n in sorted(self.flags.items())]
        if self.undecided:
            lines.append(f"  undecided by the rules (landed as the rules say; a study may pin its game list): "
                         f"{len(self.undecided)}")
            lines += [f"    {f}: {w}" for f, w in self.undecided]
        if self.notes:
            lines.append(f"  notes (decided by the rules): {len(self.notes)}")
            lines += [f"    {f}: {n}" for f, n in self.notes]
        lines += [f"  study {name}: {n} games" for name, n in sorted(self.studies.items())]
        if self.leaks:
            lines.append("  the source's seat order gives roles away (the detector lists players in a seeded shuffle; "
                         "read nothing into seat order):")
            lines += [f"    {leak}" for leak in self.leaks]
        lines.append(f"  unreadable (not landed): {len(self.unreadable)}")
        lines += [f"    {unreadable_line(f, r)}" for f, r in self.unreadable]
        return "\n".join(lines)


    def brief(self) -> str:
        """The report without its tables (`to_text` has them: `mafiabench import -v`): one line of counts, then each
        game left out by name and why, the studies, and the seat-order warning."""
        lines = [
            printable(f"import {self.format} from {self.path}: {self.games_read} games read in {self.seconds:.1f} s: "
                      f"{self.landed} landed, {self.skipped} already present, {self.valid} valid, "
                      f"{sum(self.invalid.values())} invalid (landed with a validity flag), "
                      f"{len(self.unreadable)} unreadable (not landed)")
        ]
        lines += [f"  unreadable: {unreadable_line(f, r)}" for f, r in self.unreadable]
        lines += [f"  study {printable(name)}: {n} games" for name, n in sorted(self.studies.items())]
        if self.leaks:
            lines.append("  the source's seat order gives roles away (the detector lists players in a seeded shuffle; "
                         "read nothing into seat order):")
            lines += [f"    {leak}" for leak in self.leaks]
        hidden = [f"{what}: {n}" for what, n in (
            ("invalid games by reason", len(self.invalid)), ("flagged events", sum(self.flags.values())),
            ("undecided games", len(self.undecided)), ("notes", len(self.notes))) if n]
        if hidden:
            lines.append(f"  (-v shows {', '.join(hidden)})")
        return "\n".join(lines)


def unreadable_line(file: str, reason: str) -> str:
    """A game left out of an import, for a terminal: its file and why (the reason names the file already, mostly),
    escaped (file names and the values quoted are the dataset's)."""
    return printable(reason if reason.startswith(file) else f"{file}: {reason}")


class ImportProgress(Protocol):
    """Who hears of an import's games as they are read (the import command's bar): `expect("games", n)` once the
    reader has found them, `done(name)` after each."""

    def expect(self, part: str, count: int) -> None: ...

    def done(self, name: str) -> None: ...


def run_import(
    fmt: str,
    path: Path | str,
    con: Any,
    *,
    batch_size: int = 1000,
    records_dir: Path | None = None,
    replace: bool = False,
    study: str | None = None,
    progress: ImportProgress | None = None,
) -> ImportReport:
    """Read a dataset with the format's reader and land its records in the warehouse, `batch_size` records per
    transaction. With `records_dir`, each record is also written there once, atomically, as `<game_id>.json`.
    `study` names the study the games belong to (`design.experiment`); Mini-Mafia batches default to the folder
    imported, the other formats to their source. `progress` hears of each game read."""
    from mafiabench.warehouse.landing import record_unreadable
    from mafiabench.warehouse.listing_leaks import SEATS, listing_leaks
    from mafiabench.warehouse.raw import load_records

    reader = reader_for(fmt)
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file or directory (the {fmt} dataset to import)")
    report = ImportReport(format=fmt, path=str(path))
    start = time.perf_counter()
    pending: list[GameRecord] = []
    sources: set[str] = set()

    def flush() -> None:
        if not pending:
            return
        result = load_records(con, pending, replace=replace)
        report.landed += result.inserted + result.replaced
        report.replaced += result.replaced
        report.skipped += result.skipped
        pending.clear()

    # Formats that are studies of their own (Mini-Mafia batch folders, a Mini-Mafia database) name the study
    # after what was imported; the others default to their source.
    total = None if progress is None else functools.partial(progress.expect, "games")
    items = reader(path, study=study, total=total) if fmt in STUDY_FORMATS else reader(path, total=total)
    for item in items:
        report.games_read += 1
        if progress is not None:
            progress.done(printable(item.source_file if isinstance(item, UnreadableGame)
                                    else str(item.provenance.source_file or item.game_id)))
        if isinstance(item, UnreadableGame):
            report.unreadable.append((item.source_file, item.reason))
            continue
        sources.add(str(item.provenance.source))
        if study is not None and item.design is not None:
            item.design["experiment"] = study
        name = str((item.design or {}).get("experiment") or f"source:{item.provenance.source}")
        report.studies[name] = report.studies.get(name, 0) + 1
        for e in item.events:
            if (flag := e.data.get("flag")) is not None:
                report.flags[str(flag)] = report.flags.get(str(flag), 0) + 1
        where = str(item.provenance.source_file or item.game_id)
        if item.validity.get("undecided"):
            report.undecided.append((where, str(item.validity["undecided"])))
        report.notes += [(where, str(n)) for n in item.validity.get("notes") or []]
        if item.validity.get("valid", True):
            report.valid += 1
        else:
            reason = str(item.validity.get("reason") or "unspecified")
            report.invalid[reason] = report.invalid.get(reason, 0) + 1
        if records_dir is not None:
            target = Path(records_dir) / f"{item.game_id}.json"
            if not target.exists():
                write_record_atomic(item, target)
        pending.append(item)
        if len(pending) >= batch_size:
            flush()
    flush()
    record_unreadable(con, FORMATS[fmt][2], str(path), report.unreadable)
    if sources:
        leaks = listing_leaks(con, sorted(sources))
        report.leaks = [leak.text() for leak in leaks if leak.leak and leak.listing == SEATS]
    report.seconds = time.perf_counter() - start
    return report


# -- model identity --------------------------------------------------------------------------------------------------

_PROVIDER_ALIASES = {
    "x-ai": "xai",
    "x.ai": "xai",
    "grok": "xai",
    "gemini": "google",
    "google-genai": "google",
    "vertex": "google",
    "claude": "anthropic",
    "llama.cpp": "local",
    "llamacpp": "local",
    "llama-cpp": "local",
    "gguf": "local",
    "hf": "huggingface",
    "together.ai": "together",
    "togetherai": "together",
}
_KNOWN_PROVIDERS = {
    "openai", "anthropic", "xai", "deepseek", "google", "local", "mistral", "together", "openrouter",
    "huggingface", "groq", "fireworks", "ollama", "vllm", "azure", "bedrock", "cohere",
}  # fmt: skip

# Names that differ only in spelling across batches (after lower-casing and suffix stripping) -> one canonical name.
MODEL_ALIASES: dict[str, str] = {
    "gpt4.1-mini": "gpt-4.1-mini",
    "gpt-4.1mini": "gpt-4.1-mini",
    "gpt4o-mini": "gpt-4o-mini",
    "gpt4o": "gpt-4o",
    "claude-3-5-haiku": "claude-3.5-haiku",
    "claude-3-5-sonnet": "claude-3.5-sonnet",
    "claude-3-7-sonnet": "claude-3.7-sonnet",
    "claude-sonnet-4-0": "claude-sonnet-4",
    "claude-opus-4-0": "claude-opus-4",
    "claude-opus-4-1": "claude-opus-4.1",
    "meta-llama-3.1-8b-instruct": "llama-3.1-8b-instruct",
    "llama3.1-8b-instruct": "llama-3.1-8b-instruct",
    "meta-llama-3-8b-instruct": "llama-3-8b-instruct",
}

_QUANT_SUFFIX = re.compile(r"[-_.](?:i?q\d(?:_[a-z0-9]+)*|f16|f32|bf16|fp16|fp32)$", re.IGNORECASE)
_SPLIT_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$")
_SNAPSHOT_SUFFIX = re.compile(r"(?:-latest|-\d{4}-\d{2}-\d{2}|-\d{8}|@\d{8})$")
# A host's free tier of the same weights (Together's `…-Turbo-Free`): a price, not a model.
_TIER_SUFFIX = re.compile(r"-free$")
_NAME_PROVIDER = (
    (re.compile(r"^(?:gpt|o\d|chatgpt|text-davinci)"), "openai"),
    (re.compile(r"^claude"), "anthropic"),
    (re.compile(r"^grok"), "xai"),
    (re.compile(r"^gemini"), "google"),
    (re.compile(r"^deepseek"), "deepseek"),
)


def normalise_provider(provider: str | None) -> str:
    p = (provider or "").strip().lower()
    return _PROVIDER_ALIASES.get(p, p)


def normalise_model(raw: str, provider: str | None = None) -> str:
    """One canonical `provider/model` for the same model however a source spelled it.

    Rules, in order: the provider comes from `provider` (the source's provider `type`), else from a known
    provider prefix of `raw`, else from the model family; any path or organisation prefix is dropped
    (`models/x.gguf`, `meta-llama/Llama-3.3-70B`); a GGUF file name loses its extension, split-file suffix and
    quantisation suffix (`Q4_K_M`, `Q8_0`, `IQ4_XS`, `F16`) and is served by `local`; the name is lower-cased with
    spaces as hyphens; snapshot suffixes (`-latest`, `-2025-04-14`, `-20241022`) are dropped, so a dated snapshot
    counts as its undated alias, and so is a free-tier suffix (`-Free`: the same weights at another price);
    finally `MODEL_ALIASES` maps the remaining spelling variants. The raw name is
    always kept beside it (`model_raw`), so any of these merges can be undone.
    """
    text = raw.strip().replace("\\", "/")
    prov = normalise_provider(provider)
    if "/" in text:
        head = normalise_provider(text.split("/", 1)[0])
        if not prov and head in _KNOWN_PROVIDERS:
            prov = head
        text = text.rsplit("/", 1)[-1]
    name = text
    gguf = name.lower().endswith(".gguf")
    if gguf:
        name = name[: -len(".gguf")]
        prov = prov or "local"
    if gguf or prov == "local":
        name = _SPLIT_SUFFIX.sub("", name)
        name = _QUANT_SUFFIX.sub("", name)
    name = re.sub(r"\s+", "-", name.strip().lower())
    name = _SNAPSHOT_SUFFIX.sub("", name)
    name = _TIER_SUFFIX.sub("", name)
    name = MODEL_ALIASES.get(name, name)
    if not prov:
        prov = next((p for pattern, p in _NAME_PROVIDER if pattern.match(name)), "unknown")
    return f"{prov}/{name or 'unknown'}"


# -- the Mini-Mafia design -------------------------------------------------------------------------------------------


def mini_mafia_design(models_by_role: Mapping[str, str]) -> dict[str, Any]:
    """Which capability a Mini-Mafia game measures, from the model of each role (metrics.md §2).

    One model everywhere: homogeneous, all three capabilities, target = background = that model. Exactly one
    role differs from the other two: that role's capability (mafioso: deceive, villager: detect, detective:
    disclose), target = its model, background = the model of the other two roles. All three different: no
    capability, target None, background "mixed". `cell` is named as `design.py` names design cells
    (`homogeneous|<model>`, `<capability>|<target>|<background>`), so an imported game and a simulated game of
    the same configuration share a cell; all-different games get `mixed|mafioso=…;detective=…;villager=…`.
    """
    try:
        m, d, v = models_by_role["mafioso"], models_by_role["detective"], models_by_role["villager"]
    except KeyError as exc:
        raise ValueError(f"models_by_role needs mafioso, detective and villager; got {sorted(models_by_role)}") from exc
    if m == d == v:
        return {"cell": f"homogeneous|{m}", "capabilities": ["deceive", "detect", "disclose"], "target": m,
                "background": m}
    for cap, target, background in (("deceive", m, d) if d == v else ("", "", ""),
                                    ("detect", v, m) if m == d else ("", "", ""),
                                    ("disclose", d, m) if m == v else ("", "", "")):
        if cap:
            return {"cell": f"{cap}|{target}|{background}", "capabilities": [cap], "target": target,
                    "background": background}
    return {"cell": f"mixed|mafioso={m};detective={d};villager={v}", "capabilities": [], "target": None,
            "background": "mixed"}


# -- building records ------------------------------------------------------------------------------------------------


class EventLog:
    """Appends events with consecutive `seq`, as the engine does, so imported logs read like simulated ones."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, phase: Phase, rnd: int, type_: str, **kw: Any) -> Event:
        event = Event(seq=len(self.events), phase=phase, round=rnd, type=type_, **kw)
        self.events.append(event)
        return event


def setup_events(log: EventLog, variant: str, players: list[tuple[str, str]], composition: Mapping[str, int],
                 team_of: Callable[[str], str], **extra: Any) -> None:
    """`game_start` and one private `role_assigned` per seat, with the engine's exact data keys."""
    names = [n for n, _ in players]
    log.emit("setup", 0, "game_start",
             data={"variant": variant, "players": names, "composition": dict(composition), **extra})
    mafia = [n for n, r in players if team_of(r) == "mafia"]
    for name, role in players:
        data: dict[str, Any] = {"role": role, "team": team_of(role)}
        if team_of(role) == "mafia":
            data["teammates"] = [m for m in mafia if m != name]
        log.emit("setup", 0, "role_assigned", actor=name, visibility=f"player:{name}", data=data)


def tally(votes: Iterable[str]) -> tuple[dict[str, int], list[str]]:
    """Vote counts in first-vote order, and the names sharing the top count."""
    counts = dict(Counter(votes))
    if not counts:
        return {}, []
    top = max(counts.values())
    return counts, [n for n, c in counts.items() if c == top]


def validity(reasons: list[str], details: list[str] | None = None) -> dict[str, Any]:
    """`{"valid", "reason"}` as the warehouse reads it; the first reason is the one marts group by, `details`
    says what exactly was wrong."""
    out: dict[str, Any] = {"valid": not reasons, "reason": reasons[0] if reasons else None}
    details = list(details or []) + [f"also: {r}" for r in reasons[1:]]
    if details:
        out["details"] = details
    return out


def clock(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


_ID_UNSAFE = re.compile(r"[^a-z0-9._-]+")


def make_game_id(source: str, identity: str) -> str:
    """Deterministic from the source and the game's own identity (never from the path it was read from), so
    re-importing the same game from anywhere finds it already landed. Safe as a file name."""
    ident = _ID_UNSAFE.sub("-", identity.strip().lower()).strip("-.")
    if not ident or len(ident) > 100 or ident != identity.strip().lower():
        digest = hashlib.sha256(identity.encode()).hexdigest()[:10]
        ident = f"{ident[:80]}-{digest}" if ident else digest
    return f"{source}-{ident}"


def relative_name(path: Path, base: Path) -> str:
    """`path` relative to the import's base folder, in POSIX form (the record's `source_file`)."""
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def source_base(root: Path, *, root_is_unit: bool) -> Path:
    """The folder `source_file` is relative to: the given root, or its parent when the root is itself one batch
    or one game folder, so the source file always names the batch or game it came from."""
    return root.parent if root_is_unit else root


def sha256_chunks(chunks: Iterable[bytes]) -> str:
    h = hashlib.sha256()
    for chunk in chunks:
        h.update(chunk)
    return h.hexdigest()


def folder_files(folder: Path) -> list[Path]:
    """The files of a game folder in name order (hidden files skipped): what its checksum covers."""
    return sorted((p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")), key=lambda p: p.name)



# -- text clean-up shared by the chat formats --------------------------------------------------------------------------


def apply_backspaces(text: str) -> str:
    """Stray backspace characters are the typist's own edits that the terminal did not apply: each deletes the
    character before it (a leading one deletes nothing), as the player meant."""
    if "\b" not in text:
        return text
    out: list[str] = []
    for ch in text:
        if ch == "\b":
            if out:
                out.pop()
        else:
            out.append(ch)
    return "".join(out)


def strip_speaker_prefix(text: str, speaker: str) -> str:
    """Drop the speaker's own name repeated at the start of the text (`Sam: sam: hi` → `hi`), case-insensitively,
    however many times it is repeated."""
    prefix = re.compile(r"^\s*" + re.escape(speaker) + r"\s*:\s*", re.IGNORECASE)
    while (m := prefix.match(text)) and m.end() < len(text):
        text = text[m.end():]
    return text


# -- the asynchronous variant: phases of timed chat, votes and eliminations -------------------------------------------


@dataclass
class Item:
    """One timed thing inside a phase. `t` is seconds since the game started; `prio` orders same-second items
    (0 announcements, 1 chat and votes, 2 eliminations); `seq` keeps the source order."""

    t: float
    prio: int
    seq: int
    kind: str  # message | vote | info | dropout | elimination
    actor: str | None = None
    target: str | None = None
    text: str | None = None
    visibility: str = PUBLIC
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class AsyncPhase:
    kind: str  # day | night
    round: int
    t: float
    items: list[Item] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class AsyncSummary:
    """What the log says about the game: for the outcome and the validity flag."""

    days: int = 0
    tie_decided: bool = False
    game_over_winner: str | None = None
    phases_without_votes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def number_phases(kinds: list[str]) -> list[int]:
    """Rounds are day numbers: the round increases each time the game's first kind of phase comes round again
    (day-first games: day n then night n; night-first games: night n then day n)."""
    rounds: list[int] = []
    rnd = 0
    for i, kind in enumerate(kinds):
        if i == 0 or kind == kinds[0]:
            rnd += 1
        rounds.append(rnd)
    return rounds


def build_async_log(log: EventLog, players: list[tuple[str, str]], phases: list[AsyncPhase],
                    team_of: Callable[[str], str]) -> AsyncSummary:
    """Phases → events, as the simulator logs a multi-phase game: messages (mafia chat at night), the vote that
    counted for each voter (earlier changes of mind kept in `data.previous`), then the elimination — `kill` +
    public `death` at night, `elimination` by day, with the tally and revealed role — or `no_elimination`.

    What a live game lets through but no rule allows is kept and flagged (`data.flag`), and no tally counts it:
    a vote cast by a player already eliminated (`vote_after_elimination`), for an eliminated player
    (`vote_for_eliminated_player`), a town player's vote at night (`night_vote_by_town`), a message from an
    eliminated player (`message_after_elimination`).

    A player who dropped out (a `dropout` item) is absent, not eliminated: votes cast against them count as cast
    and they may still be eliminated, as the live game allowed; only the win condition stops counting them (the
    live game did). A dropout item flagged by its reader (the player was eliminated within that phase anyway)
    checks no win condition: the elimination decides."""
    role_of = dict(players)
    active = {n for n, _ in players}
    absent: set[str] = set()
    summary = AsyncSummary()
    over = False

    def winner_now() -> str | None:
        present = active - absent
        mafia = sum(1 for n in present if team_of(role_of[n]) == "mafia")
        return "town" if mafia == 0 else "mafia" if mafia >= len(present) - mafia else None

    for ph in phases:
        after = over
        if after and all(i.kind == "info" and i.data.get("flag") for i in ph.items):
            continue  # the phase change that the game's last elimination triggered (and its repeats): nothing played
        data = {"clock": clock(ph.t), **ph.data}
        if after:
            data["after_game_over"] = True
        log.emit(ph.kind, ph.round, "phase_start", text=f"{ph.kind.capitalize()} {ph.round} begins.", data=data)  # type: ignore[arg-type]
        if ph.kind == "day" and not after:
            summary.days = max(summary.days, ph.round)
        items = sorted(ph.items, key=lambda i: (i.t, i.prio, i.seq))
        last_vote: dict[str, Item] = {}
        previous: dict[str, list[dict[str, Any]]] = {}
        for it in items:
            if it.kind == "vote" and it.actor is not None:
                if it.actor in last_vote:
                    old = last_vote[it.actor]
                    previous.setdefault(it.actor, []).append({"target": old.target, "clock": clock(old.t)})
                last_vote[it.actor] = it
        eliminated = False
        for it in items:
            base = {"clock": clock(it.t), **it.data}
            if it.kind == "message":
                if it.actor in role_of and it.actor not in active:
                    base["flag"] = "message_after_elimination"
                type_ = "mafia_message" if ph.kind == "night" else "message"
                log.emit(ph.kind, ph.round, type_, actor=it.actor, text=it.text, visibility=it.visibility,  # type: ignore[arg-type]
                         data=base)
            elif it.kind == "vote":
                if it.actor is None or last_vote.get(it.actor) is not it:
                    continue
                if previous.get(it.actor):
                    base["previous"] = previous[it.actor]
                if ph.kind == "night":
                    base["kind"] = "night_proposal"
                if it.target not in role_of or not _eligible(it, ph.kind, active, role_of, team_of):
                    base["counted"] = False
                if it.actor not in active:
                    base["flag"] = "vote_after_elimination"
                elif it.target in role_of and it.target not in active:
                    base["flag"] = "vote_for_eliminated_player"
                elif ph.kind == "night" and team_of(role_of.get(it.actor, "")) != "mafia":
                    base["flag"] = "night_vote_by_town"
                log.emit(ph.kind, ph.round, "vote", actor=it.actor, target=it.target, visibility=it.visibility,  # type: ignore[arg-type]
                         data=base)
            elif it.kind == "info":
                log.emit(ph.kind, ph.round, "info", actor=it.actor, text=it.text, visibility=it.visibility,  # type: ignore[arg-type]
                         data=base)
            elif it.kind == "dropout" and it.actor is not None:
                was_present = it.actor in active and it.actor not in absent
                absent.add(it.actor)
                log.emit(ph.kind, ph.round, "info", actor=it.actor, text=f"{it.actor} dropped out.",  # type: ignore[arg-type]
                         data={**base, "kind": "dropout"})
                if was_present and "flag" not in it.data and not over and winner_now() is not None:
                    over = True
                    summary.game_over_winner = winner_now()
            elif it.kind == "elimination" and it.target is not None:
                victim = it.target
                counted = [v.target for v in last_vote.values()
                           if v.target in role_of and v.target in active
                           and _eligible(v, ph.kind, active, role_of, team_of)]
                counts, top = tally(t for t in counted if t is not None)
                if not counts and it.data.get("announced_votes"):  # anonymous voting: only the tally is known
                    counts = dict(it.data["announced_votes"])
                    top = [n for n, c in counts.items() if c == max(counts.values())]
                tie = len(top) > 1 and victim in top
                if counts and victim not in top:
                    summary.problems.append(f"{ph.kind} {ph.round}: {victim} eliminated without a plurality {counts}")
                if eliminated:
                    summary.problems.append(f"{ph.kind} {ph.round}: more than one elimination")
                if victim not in active:
                    summary.problems.append(f"{ph.kind} {ph.round}: {victim} eliminated but not an active player")
                eliminated = True
                role = role_of.get(victim)
                edata = {**base, "votes": counts, "role": role, "role_revealed": True}
                if ph.kind == "night":
                    mafia = [n for n in role_of if n in active and team_of(role_of[n]) == "mafia"]
                    killer = mafia[0] if len(mafia) == 1 else "mafia"  # as the classic engine names a mafia vote
                    log.emit("night", ph.round, "kill", actor=killer, target=victim, visibility="team:mafia",
                             tie_break=tie, text=f"You killed {victim}.")
                    log.emit("night", ph.round, "death", target=victim, tie_break=tie,
                             text=f"{victim} was found dead.", data={"cause": "night_kill", **edata})
                else:
                    log.emit("day", ph.round, "elimination", target=victim, tie_break=tie,
                             text=f"{victim} was eliminated; they were {role}.", data=edata)
                active.discard(victim)
                if not over:
                    summary.tie_decided = tie
                    if (w := winner_now()) is not None:
                        over = True
                        summary.game_over_winner = w
        if not eliminated and not after:
            counted = [v.target for v in last_vote.values()
                       if v.target in role_of and _eligible(v, ph.kind, active, role_of, team_of)]
            counts, _ = tally(t for t in counted if t is not None)
            reason = "no votes cast" if not counts else "no elimination recorded"
            t_end = items[-1].t if items else ph.t
            log.emit(ph.kind, ph.round, "no_elimination", text=f"Nobody was eliminated ({reason}).",  # type: ignore[arg-type]
                     visibility=PUBLIC if ph.kind == "day" else "team:mafia",
                     data={"clock": clock(t_end), "votes": counts, "reason": reason})
            if counts:
                summary.problems.append(f"{ph.kind} {ph.round}: votes {counts} but no elimination recorded")
            else:
                summary.phases_without_votes.append(f"{ph.kind} {ph.round}")
    return summary


def phases_without_votes(summary: AsyncSummary, phases: list[AsyncPhase], *, finished: bool) -> list[str]:
    """Phases that ended with no votes; in a game that never finished, the phase it stopped in is not counted
    (it was interrupted, not played without voting)."""
    out = list(summary.phases_without_votes)
    if not finished and phases and out and out[-1] == f"{phases[-1].kind} {phases[-1].round}":
        out.pop()
    return out


def _eligible(vote: Item, phase: str, active: set[str], role_of: Mapping[str, str],
              team_of: Callable[[str], str]) -> bool:
    """A vote counts when its voter is still in the game and, at night, is a mafioso."""
    voter = vote.actor
    if voter is None or voter not in active:
        return False
    return phase != "night" or team_of(role_of[voter]) == "mafia"


def async_outcome(recorded: str | None, summary: AsyncSummary, *, aborted: bool = False) -> dict[str, Any]:
    """The outcome dict: the winner the source recorded (never guessed), why, and the days played."""
    if recorded is None:
        return {"status": "unfinished", "winner": None, "reason": "aborted" if aborted else "no winner recorded",
                "tie_decided": False, "days": summary.days}
    reason = "no mafia left" if recorded == "town" else "mafia reached parity"
    return {"status": "finished", "winner": recorded, "reason": reason, "tie_decided": summary.tie_decided,
            "days": summary.days}


def game_end(log: EventLog, outcome: Mapping[str, Any], players: list[tuple[str, str]]) -> None:
    last = log.events[-1].round if log.events else 0
    log.emit("end", last, "game_end", data={"winner": outcome["winner"], "reason": outcome["reason"],
                                            "status": outcome["status"], "tie_decided": outcome["tie_decided"],
                                            "roles": dict(players)})


def team_of(role: str) -> str:
    """The engine's team of a role; a role the engine does not know (a human study's `bystander`) is town."""
    return ROLE_TEAM.get(role, "town")


# -- the shared steps of an async record (Dallinger, LLMafia) ---------------------------------------------------------


@dataclass
class AsyncEnding:
    """What `end_async_game` made of a game's phases: its events, outcome, and the validity reasons and details so
    far (a source adds its own reasons after these)."""

    events: list[Event]
    outcome: dict[str, Any]
    reasons: list[str]
    details: list[str]
    without: list[str]  # phases that ended with no votes


def end_async_game(variant: str, players: list[tuple[str, str]], phases: list[AsyncPhase], composition:
                   Mapping[str, int], recorded: str | None, problems: list[str], *, recorded_as: str,
                   aborted: bool = False) -> AsyncEnding:
    """The log of an async game from its phases, the recorded winner checked against the players left (the
    mismatch said as `recorded_as`, the source's own words for what it recorded), the outcome, and the validity
    reasons every async source shares. `problems` gains the log's and the winner's problems."""
    log = EventLog()
    setup_events(log, variant, players, composition, team_of)
    summary = build_async_log(log, players, phases, team_of)
    problems += summary.problems
    if recorded is not None and summary.game_over_winner not in (None, recorded):
        problems.append(f"{recorded_as} but the players left say {summary.game_over_winner}")
    outcome = async_outcome(recorded, summary, aborted=aborted)
    game_end(log, outcome, players)
    reasons = []
    if aborted:
        reasons.append("aborted")
    if problems:
        reasons.append("technical failure")
    if recorded is None and not aborted:
        reasons.append("no winner recorded")
    without = phases_without_votes(summary, phases, finished=recorded is not None)
    if without:
        reasons.append("no votes cast")
    details = problems + [f"no votes cast in {p}" for p in without]
    return AsyncEnding(log.events, outcome, reasons, details, without)


def read_game_folders(path: Path | str, source: str, markers: tuple[str, ...],
                      build: Callable[[Path, str, str], GameRecord], *, not_found: str,
                      required: tuple[str, ...] = (), total: Callable[[int], None] | None = None
                      ) -> Iterator[ImportedGame]:
    """Every game folder under `path` (a folder of game folders, or one game folder), a game folder being one that
    holds any of `markers`: each built by `build(folder, rel, sha)`, or unreadable with the reason (a `required`
    file missing, a FormatProblem, an OSError). `not_found` says what was expected when no game folder is found;
    `total` hears how many game folders there are (a progress bar)."""
    root = Path(path)
    if any((root / m).exists() for m in markers):
        folders, base = [root], source_base(root, root_is_unit=True)
    else:
        folders = sorted({p.parent for name in markers for p in root.rglob(name)})
        base = root
    if not folders:
        raise UserError(f"{root}: {not_found}")
    if total is not None:
        total(len(folders))
    for folder in folders:
        rel = relative_name(folder, base)
        missing = [f for f in required if not (folder / f).exists()]
        if missing:
            yield UnreadableGame(source, rel, f"{rel}: {', '.join(missing)} missing")
            continue
        try:
            sha = sha256_chunks(p.read_bytes() for p in folder_files(folder))
            yield build(folder, rel, sha)
        except FormatProblem as exc:
            yield UnreadableGame(source, rel, str(exc))
        except OSError as exc:
            yield UnreadableGame(source, rel, f"{rel}: cannot read ({exc})")


# -- the shared steps of a Mini-Mafia record (batch files, SQLite database) -------------------------------------------

MINI_MAFIA_ROLES = ("detective", "mafioso", "villager")


def mini_mafia_night(players: list[tuple[str, str]], roles: Mapping[str, str], mafioso: str,
                     victim: str | None) -> EventLog:
    """The log up to the night's kill, as the engine writes it: the setup (the composition counted over `roles`,
    name -> role), `Night 1 begins.`, and the kill and the death when there was a victim."""
    log = EventLog()
    counts = Counter(roles.values())
    setup_events(log, "mini-mafia", players, {r: counts[r] for r in MINI_MAFIA_ROLES}, team_of)
    log.emit("night", 1, "phase_start", text="Night 1 begins.")
    if victim is not None:
        log.emit("night", 1, "kill", actor=mafioso, target=victim, visibility="team:mafia",
                 text=f"You killed {victim}.")
        log.emit("night", 1, "death", target=victim, text=f"{victim} was found dead.", data={"cause": "night_kill"})
    return log


def mini_mafia_investigation(log: EventLog, detective: str, target: str, result: str) -> None:
    """The detective's scripted investigation, in the engine's words."""
    article = "the" if result in ("mafioso", "detective") else "a"
    log.emit("night", 1, "investigate", actor=detective, target=target, visibility=f"player:{detective}",
             text=f"You investigated {target} and discovered that they are {article} {result}.",
             data={"result": result, "scripted": True})


def mini_mafia_ending(log: EventLog, arrested: str | None, role: str | None, counts: dict[str, int], top: list[str],
                      roles: Mapping[str, str]) -> dict[str, Any]:
    """The day's arrest (when there was one: `role` is the arrested player's) and the game's end; the outcome they
    make (a tie the arrest settled is `tie_decided`)."""
    tie = arrested is not None and len(top) > 1 and arrested in top
    if arrested is not None:
        log.emit("day", 1, "elimination", target=arrested, tie_break=tie, text=f"{arrested} was arrested",
                 data={"votes": counts, "role": role, "role_revealed": False})
        winner = "town" if role == "mafioso" else "mafia"
        outcome: dict[str, Any] = {"status": "finished", "winner": winner,
                   "reason": "mafioso arrested" if winner == "town" else "innocent arrested", "tie_decided": tie,
                   "days": 1}
    else:
        outcome = {"status": "unfinished", "winner": None, "reason": "no arrest recorded", "tie_decided": False,
                   "days": 1}
    log.emit("end", 1, "game_end", data={"winner": outcome["winner"], "reason": outcome["reason"],
                                         "status": outcome["status"], "tie_decided": tie, "roles": dict(roles)})
    return outcome


MINI_MAFIA_SILENT = "remained silent"
MINI_MAFIA_TRUNCATION = "..."
RANDOM_MARK = " (random)"


def random_marked(parsed: str | None) -> tuple[str | None, bool]:
    """The study's code logs a choice it made at random after a failed format as `"<name> (random)"`
    (`src/agents.py`: votes, kills, investigations): the name, and whether it was so marked."""
    if parsed is not None and parsed.endswith(RANDOM_MARK):
        return parsed[: -len(RANDOM_MARK)], True
    return parsed, False


def mini_mafia_day(log: EventLog, talk: list[dict[str, Any]], cast: list[dict[str, Any]], day: list[str],
                   random_vote: Mapping[str, bool], table_votes: Mapping[str, str],
                   problems: list[str]) -> tuple[dict[str, int], list[str]]:
    """The day of a Mini-Mafia study database (`step`, `actor`, `raw_response`, `parsed_result` rows of its
    discussion and its votes, in order) as the engine writes it; each raw answer is read again with our reference
    parser beside the study's own reading. `random_vote` (the votes table's failed parses, where there is one) and a
    `(random)` mark on the parsed vote both say a vote was cast at random. Returns the tally and its top names;
    what disagrees is appended to `problems`."""
    log.emit("day", 1, "phase_start", text="Day 1 begins.")
    for i, s in enumerate(talk):
        data: dict[str, Any] = {"discussion_round": i // max(len(day), 1) + 1}
        if s["raw_response"] is not None:
            message, cut, _ = parse_message_reference(s["raw_response"], strip_think=True)
            ours = MINI_MAFIA_SILENT if message is None else message + (MINI_MAFIA_TRUNCATION if cut else "")
            theirs = MINI_MAFIA_SILENT if s["parsed_result"] is None or \
                s["parsed_result"].strip().lower().rstrip(".") == MINI_MAFIA_SILENT else s["parsed_result"]
            data.update(raw_response=s["raw_response"], reparsed=ours, parse_agrees=ours == theirs)
        if s["actor"] not in day:
            problems.append(f"step {s['step']}: {s['actor']} speaks but is not a day player")
        text = s["parsed_result"]
        if text is None or text.strip().lower().rstrip(".") == MINI_MAFIA_SILENT:
            log.emit("day", 1, "silence", actor=s["actor"], text=f"{s['actor']} remained silent.",
                     format_failure=True, random_fallback=True, data=data)
        else:
            truncated = text.endswith(MINI_MAFIA_TRUNCATION)
            log.emit("day", 1, "message", actor=s["actor"],
                     text=text[: -len(MINI_MAFIA_TRUNCATION)] if truncated else text, truncated=truncated, data=data)
    targets: list[Any] = []  # a vote's missing target counts as the study's tally counted it
    for s in cast:
        voter = s["actor"]
        target, marked = random_marked(s["parsed_result"])
        targets.append(target)
        fallback = random_vote.get(voter, False) or marked
        if voter not in day or target not in day or target == voter:
            problems.append(f"step {s['step']}: vote by {voter} for {s['parsed_result']!r}")
        if voter in table_votes and table_votes[voter] != target:
            problems.append(f"votes table: {voter} voted for {table_votes[voter]}, game_sequence says {target}")
        data = {}
        if s["raw_response"] is not None:
            choices = [n for n in day if n != voter]
            reparsed, _, _ = parse_name_reference(s["raw_response"], choices, strip_think=True)
            known = voter in random_vote or marked  # unknown without a votes row or a mark
            agrees = (reparsed == target and not fallback) if reparsed is not None else (fallback if known else None)
            data = {"raw_response": s["raw_response"], "reparsed": reparsed, "parse_agrees": agrees}
        log.emit("day", 1, "vote", actor=voter, target=target, format_failure=fallback, random_fallback=fallback,
                 data=data)
    return tally(targets)

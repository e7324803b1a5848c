"""What every importer shares: the item type readers yield, the import report and driver, model-name
normalisation, the Mini-Mafia design derivation, and small helpers that keep imported records shaped exactly
like simulated ones (sequential events, clocks, deterministic ids, checksums).

Readers are pure (path in, records out); only `run_import` touches the warehouse, through
`warehouse.load_records`, so importing twice is idempotent by game id.
"""

from __future__ import annotations

import hashlib
import importlib
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mafiabench.engine.events import PUBLIC, Event, Phase
from mafiabench.errors import UserError
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
Reader = Callable[[Path], Iterator[ImportedGame]]

# format name -> (module, reader function, source name); modules are imported lazily (no import cycle).
FORMATS: dict[str, tuple[str, str, str]] = {
    "mini-mafia": ("mafiabench.importers.mini_mafia_batch", "read_mini_mafia", "mini-mafia-batch"),
    "dallinger": ("mafiabench.importers.dallinger", "read_dallinger", "ibraheem2022-human"),
    "llmafia": ("mafiabench.importers.llmafia", "read_llmafia", "llmafia"),
}


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
        lines.append(f"  unreadable (not landed): {len(self.unreadable)}")
        lines += [f"    {f}: {r}" for f, r in self.unreadable]
        return "\n".join(lines)


def run_import(
    fmt: str,
    path: Path | str,
    con: Any,
    *,
    batch_size: int = 1000,
    records_dir: Path | None = None,
    replace: bool = False,
) -> ImportReport:
    """Read a dataset with the format's reader and land its records in the warehouse, `batch_size` records per
    transaction. With `records_dir`, each record is also written there once, atomically, as `<game_id>.json`."""
    from mafiabench.warehouse import load_records

    reader = reader_for(fmt)
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file or directory (the {fmt} dataset to import)")
    report = ImportReport(format=fmt, path=str(path))
    start = time.perf_counter()
    pending: list[GameRecord] = []

    def flush() -> None:
        if not pending:
            return
        result = load_records(con, pending, replace=replace)
        report.landed += result.inserted + result.replaced
        report.replaced += result.replaced
        report.skipped += result.skipped
        pending.clear()

    for item in reader(path):
        report.games_read += 1
        if isinstance(item, UnreadableGame):
            report.unreadable.append((item.source_file, item.reason))
            continue
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
    counts as its undated alias; finally `MODEL_ALIASES` maps the remaining spelling variants. The raw name is
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
    capability, target None, background "mixed". `cell` names the combination, so games of one model
    configuration share a cell whichever experiment played them.
    """
    try:
        m, d, v = models_by_role["mafioso"], models_by_role["detective"], models_by_role["villager"]
    except KeyError as exc:
        raise ValueError(f"models_by_role needs mafioso, detective and villager; got {sorted(models_by_role)}") from exc
    cell = f"mafioso={m};detective={d};villager={v}"
    if m == d == v:
        return {"cell": cell, "capabilities": ["deceive", "detect", "disclose"], "target": m, "background": m}
    if d == v:
        return {"cell": cell, "capabilities": ["deceive"], "target": m, "background": d}
    if m == d:
        return {"cell": cell, "capabilities": ["detect"], "target": v, "background": m}
    if m == v:
        return {"cell": cell, "capabilities": ["disclose"], "target": d, "background": m}
    return {"cell": cell, "capabilities": [], "target": None, "background": "mixed"}


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
    ident = _ID_UNSAFE.sub("-", identity.strip().lower()).strip("-.") or hashlib.sha256(identity.encode()).hexdigest()[:16]
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


def visibility_for(phase: str) -> str:
    return "team:mafia" if phase == "night" else PUBLIC

"""The canonical game record: one versioned JSON envelope per game, self-sufficient.

Simulations and importers both produce it; landing, marts and dashboards read only it. It holds the rules, seed,
players with their agents, prompt version and hash, code provenance, every event and every model call. Serialised
with a fixed key order and no wall-clock field outside the model calls, so the same seed and the same answers give
the same bytes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import orjson
from pydantic import BaseModel

from mafiabench import __version__
from mafiabench.engine.claims import Claim
from mafiabench.engine.core import ROLE_TEAM, GameEngine, Outcome
from mafiabench.engine.events import Event
from mafiabench.redact import known_secrets, scrub_json

RECORD_VERSION = 1


class ModelCall(TypedDict, total=False):
    """One model call, as recorded in `GameRecord.calls` (and `raw_model_calls`): typed and timestamped.

    `request` holds the messages and settings sent (never a key or a header); `response` the text received (None
    when the call failed for good); `parse` whether the answer met the required format; `prefix_reuse_chars` how
    much of the prompt repeats the same player's previous one (what a provider's prefix cache can reuse).
    """

    index: int | None
    player: str
    action: str
    phase: str
    round: int
    provider: str
    model: str
    started_at: str
    request: dict[str, Any]
    prompt_chars: int
    prefix_reuse_chars: int
    latency_ms: float
    attempts: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    error_class: str | None
    finish_reason: str | None
    response: str | None
    parse: dict[str, Any]


@dataclass
class PlayerRecord:
    """A seat. `agent` is the full agent spec (`openai/gpt-4.1-mini`, `policy/random`, `human/terminal`);
    `model` the normalised model identity used by marts; `model_raw` the name as the source spelled it."""

    seat: int | None  # None where the source has no seats (Mini-Mafia batches): never invented
    name: str
    role: str
    agent: str
    model: str
    model_raw: str | None = None

    @property
    def team(self) -> str:
        return ROLE_TEAM.get(self.role, "town")

    def to_dict(self) -> dict[str, Any]:
        return {
            "seat": self.seat,
            "name": self.name,
            "role": self.role,
            "team": self.team,
            "agent": self.agent,
            "model": self.model,
            "model_raw": self.model_raw if self.model_raw is not None else self.model,
        }


@dataclass
class Provenance:
    """Where a record came from. For imports: the source name, file and its sha256."""

    package_version: str = __version__
    git_commit: str | None = None
    source: str = "simulation"
    source_file: str | None = None
    source_sha256: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "package_version": self.package_version,
            "git_commit": self.git_commit,
            "source": self.source,
            "source_file": self.source_file,
            "source_sha256": self.source_sha256,
        }


@dataclass
class GameRecord:
    game_id: str
    variant: str
    seed: int | None
    rules: dict[str, Any]
    players: list[PlayerRecord]
    events: list[Event]
    outcome: dict[str, Any]
    calls: list[ModelCall] = field(default_factory=list)
    prompt: dict[str, Any] | None = None
    design: dict[str, Any] | None = None
    provenance: Provenance = field(default_factory=Provenance)
    validity: dict[str, Any] = field(default_factory=lambda: {"valid": True, "reason": None})
    error: str | None = None
    # Statement labels (`[statements]`): one entry per public message, with its checkable claims and its labels;
    # None (and no key in the record) when the layer was off, so records without labels keep their bytes.
    statements: list[dict[str, Any]] | None = None

    def to_dict(self, *, events: bool = True) -> dict[str, Any]:
        """The record as plain data; with `events=False` the events stay `Event` objects (for orjson)."""
        out: dict[str, Any] = {
            "record_version": RECORD_VERSION,
            "game_id": self.game_id,
            "variant": self.variant,
            "seed": self.seed,
            "rules": self.rules,
            "design": self.design,
            "players": [p.to_dict() for p in self.players],
            "prompt": self.prompt,
            "provenance": self.provenance.to_dict(),
            "outcome": self.outcome,
            "validity": self.validity,
            "error": self.error,
            "events": [e.to_dict() for e in self.events] if events else list(self.events),
            "calls": self.calls,
        }
        if self.statements is not None:
            out["statements"] = self.statements
        return out

    def to_json(self) -> str:
        return dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GameRecord:
        version = d.get("record_version")
        if version != RECORD_VERSION:
            raise ValueError(f"record_version {version!r} is not supported (expected {RECORD_VERSION})")
        return cls(
            game_id=d["game_id"],
            variant=d["variant"],
            seed=d.get("seed"),
            rules=d.get("rules") or {},
            design=d.get("design"),
            players=[
                PlayerRecord(
                    seat=p.get("seat"),
                    name=p["name"],
                    role=p["role"],
                    agent=p["agent"],
                    model=p["model"],
                    model_raw=p.get("model_raw"),
                )
                for p in d["players"]
            ],
            prompt=d.get("prompt"),
            provenance=Provenance(**(d.get("provenance") or {})),
            outcome=d["outcome"],
            validity=d.get("validity") or {"valid": True, "reason": None},
            error=d.get("error"),
            events=[Event.from_dict(e) for e in d.get("events", [])],
            calls=list(d.get("calls") or []),
            statements=d.get("statements"),
        )

    @classmethod
    def from_json(cls, text: str) -> GameRecord:
        return cls.from_dict(json.loads(text))

    @property
    def winner(self) -> str | None:
        return self.outcome.get("winner")


def statement_truth(entry: dict[str, Any], roles: dict[str, str]) -> dict[str, Any]:
    """What the game says of one entry of a record's `statements`: its checkable claims (unhedged ones) and how
    many are false by the players' roles, the role or team the speaker claims for itself (and whether it is so), the
    players it says are mafia (and whether all are). `false_claim`: at least one checkable claim is false."""
    claims = [Claim.from_dict(c) for c in entry.get("claims") or ()]
    firm = [c for c in claims if not c.hedged]
    held = [c.holds(roles) for c in firm]
    own = next((c for c in firm if c.player == entry.get("speaker")), None)
    accused = [c.player for c in firm if (c.value == "mafia" and c.said == "team" and not c.negated)
               or (c.value == "mafioso" and c.said == "role" and not c.negated)]
    own_claim = None if own is None else ("not " if own.negated else "") + own.value
    return {
        "n_claims": len(claims),
        "n_checkable_claims": len(firm),
        "n_false_claims": sum(1 for h in held if h is False),
        "false_claim": any(h is False for h in held),
        "self_claim": own_claim,
        "self_claim_true": None if own is None else own.holds(roles),
        "accused": accused,
        "accusations_true": all(roles.get(p) == "mafioso" for p in accused) if accused else None,
    }


def dumps(obj: Any) -> str:
    """The one serialisation of records: stable key order as built, UTF-8, one trailing newline."""
    return json.dumps(obj, ensure_ascii=False, indent=1) + "\n"


def _dumps_line(obj: Any) -> bytes:
    try:
        return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):  # an integer past 64 bits, say: the standard library takes it
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=_event_dict).encode()


def _event_dict(obj: Any) -> dict[str, Any]:
    if isinstance(obj, Event):
        return obj.to_dict()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def encode_record(record: GameRecord, secrets: list[str] | None = None) -> tuple[dict[str, Any], bytes]:
    """The record as stored in a shard file: one line of compact JSON (secrets scrubbed), and its dict.

    The line holds exactly the dict `to_dict` gives, so `record_from_line(line).to_json()` is byte for byte the
    record's `to_json()` (tests/test_golden.py pins that). Serialised with orjson: about 30 times faster than the
    indented `to_json`, which matters when a run writes thousands of games a second. The events stay `Event`
    objects in the dict (orjson writes a dataclass's fields in order, as `Event.to_dict` does, without building
    the dicts; `vars(event)` is that dict); where a secret had to be scrubbed, the dict is the line read back.
    `secrets`: `known_secrets()`, when the caller encodes many records at once (it reads the environment)."""
    d = record.to_dict(events=False)
    line = _dumps_line(d)
    if secrets is None:
        secrets = known_secrets()
    if secrets:  # safety net: a known secret inside a record never reaches a file or a table
        text = line.decode()
        clean = scrub_json(text, secrets)
        if clean != text:
            line = clean.encode()
            d = orjson.loads(line)
    return d, line


def record_from_line(line: bytes | str) -> GameRecord:
    return GameRecord.from_dict(orjson.loads(line))


@functools.lru_cache(maxsize=256)
def _rules_json(rules: BaseModel) -> str:
    return rules.model_dump_json()


def _rules_dict(rules: BaseModel) -> dict[str, Any]:
    """A rules model as plain data, its JSON remembered (rules are frozen models, and a study plays thousands of
    games with the same one); a fresh dict each time."""
    try:
        text = _rules_json(rules)
    except TypeError:  # an unhashable field value
        text = rules.model_dump_json()
    return orjson.loads(text)  # type: ignore[no-any-return]


def record_from_engine(
    game_id: str,
    game: GameEngine,
    agents_by_name: dict[str, str],
    models_by_name: dict[str, str],
    *,
    calls: Sequence[ModelCall] = (),
    prompt: dict[str, Any] | None = None,
    design: dict[str, Any] | None = None,
    provenance: Provenance | None = None,
    error: str | None = None,
    abandoned: str | None = None,
    statements: list[dict[str, Any]] | None = None,
) -> GameRecord:
    """The record of a game as the engine left it; `error` marks it failed, `abandoned` (why) marks a game a person
    left before its end, so neither is ever scored."""
    outcome: Outcome = game.outcome
    out = outcome.to_dict()
    if error is not None:
        out["status"] = "failed"
        out["winner"] = None
    elif abandoned is not None:
        out["status"] = "abandoned"
        out["winner"] = None
        out["reason"] = abandoned
    return GameRecord(
        game_id=game_id,
        variant=game.variant,
        seed=game.seed,
        rules=_rules_dict(game.rules),
        players=[
            PlayerRecord(
                seat=p.seat,
                name=p.name,
                role=p.role,
                agent=agents_by_name[p.name],
                model=models_by_name[p.name],
            )
            for p in game.players
        ],
        events=list(game.log),
        outcome=out,
        calls=list(calls),
        prompt=prompt,
        design=design,
        provenance=provenance or Provenance(git_commit=git_commit()),
        error=error,
        statements=statements,
    )


def write_record_atomic(record: GameRecord, path: Path) -> None:
    """Write once, atomically: a temp file in the same folder, fsync, then rename (a crash leaves no half file)."""
    write_bytes_atomic(scrub_json(record.to_json()).encode(), path)  # safety net: no known secret reaches a file


def write_bytes_atomic(data: bytes, path: Path) -> None:
    """`data` as `path`, whole or not at all: a `.tmp-` file in the same folder, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_GIT_COMMIT: list[str | None] = []


def git_commit() -> str | None:
    """The checkout's commit, if the package runs from one (cached; None when not in a git tree)."""
    if not _GIT_COMMIT:
        try:
            out = subprocess.run(
                ["git", "rev-parse", "HEAD"],
                cwd=Path(__file__).resolve().parent,
                capture_output=True,
                text=True,
                timeout=5,
                check=False,
            )
            _GIT_COMMIT.append(out.stdout.strip() or None if out.returncode == 0 else None)
        except (OSError, subprocess.SubprocessError):
            _GIT_COMMIT.append(None)
    return _GIT_COMMIT[0]

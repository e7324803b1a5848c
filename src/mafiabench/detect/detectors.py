"""Detectors: something that reads a cleansed transcript and names exactly k players as the mafia.

`provider/model` is a language model behind any backend (its own prompt file, temperature recorded, 0 by default as
in the reference). Offline, with no key: `policy/most-voted` names the k players who received the most day votes in
the transcript (ties broken by a seed derived from game, cut and detector), `policy/random` names k players uniformly
at random (the random baseline, simulated). Answers are parsed tolerantly; when fewer than k valid names come back
the rest are drawn at random from the seed and the detection is flagged (`format_failure`, `random_fallback`).
"""

from __future__ import annotations

import hashlib
import random
import re
import time
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, Protocol

from mafiabench.backends.backend import Backend, BackendError, GenerateSettings, Message
from mafiabench.detect.cleansed_transcript import LISTING, Transcript
from mafiabench.engine.core import derive_seed
from mafiabench.errors import UserError
from mafiabench.redact import redact

POLICIES = ("most-voted", "random")
DEFAULT_PROMPT_VERSION = "v1"


@dataclass(frozen=True)
class DetectorPrompt:
    """A detector prompt version: the question (`prompt.txt`) and the words of the cleansed transcript's lines
    (`transcript.toml`), everything the detector model reads besides game data. `sha256` covers both files and how
    the players are listed (`LISTING`)."""

    version: str
    template: str
    sha256: str
    words: dict[str, str] = field(default_factory=dict)


def _files_sha256(files: Sequence[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for name, text in files:
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()


@cache
def load_detector_prompt(version: str = DEFAULT_PROMPT_VERSION) -> DetectorPrompt:
    """A shipped version: the folder `prompts/<version>/` (`prompt.txt`, `transcript.toml`)."""
    root = resources.files("mafiabench.detect") / "prompts"
    folder = root / version
    if not (folder / "prompt.txt").is_file():
        known = sorted(p.name for p in root.iterdir() if (p / "prompt.txt").is_file())
        raise UserError(f"no detector prompt {version!r} (looked for {folder}/prompt.txt); known: {', '.join(known)}")
    return _prompt(version, folder.joinpath("prompt.txt").read_text(encoding="utf-8"),
                   folder.joinpath("transcript.toml").read_text(encoding="utf-8"))


def _prompt(version: str, template: str, transcript_toml: str) -> DetectorPrompt:
    words = {k: str(v) for k, v in tomllib.loads(transcript_toml).items()}
    sha = _files_sha256([("prompt.txt", template), ("transcript.toml", transcript_toml), ("listing", LISTING)])
    return DetectorPrompt(version, template, sha, words)


PLACEHOLDERS = ("players", "k", "cut", "transcript")


def load_detector_prompt_file(path: str | Path, transcript: str | Path | None = None) -> DetectorPrompt:
    """Your own detector prompt: a text file with the placeholders `$players`, `$k`, `$cut`, `$transcript` (an
    unknown `$name` is an error naming the file). Its version is `file:<name>`; the transcript's lines are those of
    the default version (or of the `transcript` file given), and the SHA-256 of both keys the detections (a copy of
    the shipped `prompt.txt` hashes as the shipped version)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: detector prompt file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the detector prompt file: {exc}") from None
    try:
        Template(text).substitute({name: "x" for name in PLACEHOLDERS})
    except KeyError as exc:
        raise UserError(
            f"{path}: unknown placeholder ${exc.args[0]} in the detector prompt; known: "
            + ", ".join("$" + p for p in PLACEHOLDERS) + " (write $$ for a dollar sign)"
        ) from None
    except ValueError as exc:
        raise UserError(f"{path}: bad placeholder in the detector prompt: {exc} (write $$ for a dollar sign)") from None
    if "$transcript" not in text and "${transcript}" not in text:
        raise UserError(f"{path}: the detector prompt never shows the transcript (no $transcript placeholder)")
    shipped = resources.files("mafiabench.detect") / "prompts" / DEFAULT_PROMPT_VERSION / "transcript.toml"
    lines = (Path(transcript) if transcript is not None else shipped).read_text(encoding="utf-8")
    return _prompt(f"file:{path.name}", text, lines)


def render_prompt(prompt: DetectorPrompt, t: Transcript) -> str:
    """The prompt over a transcript cleansed with this prompt's words (`cleanse(..., prompt.words)`)."""
    return Template(prompt.template).substitute(
        players=", ".join(t.players), k=t.k, cut=t.cut, transcript=t.text or prompt.words["empty"]
    )


@dataclass
class Detection:
    """One detector's answer for one (game, cut)."""

    predicted: list[str]
    format_failure: bool = False
    random_fallback: bool = False
    parse_error: str | None = None
    response: str | None = None
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    attempts: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class Detector(Protocol):
    @property
    def spec(self) -> str: ...
    @property
    def prompt_version(self) -> str | None: ...
    @property
    def prompt_sha256(self) -> str: ...
    @property
    def temperature(self) -> float | None: ...
    @property
    def transcript_words(self) -> dict[str, str]: ...  # the words of the transcript it reads (or is shown with)

    async def detect(self, t: Transcript) -> Detection: ...


def rng_for(t: Transcript, spec: str) -> random.Random:
    return random.Random(derive_seed("detect", t.game_id, t.cut, spec))


def parse_names(text: str, players: Sequence[str], k: int) -> tuple[list[str], str | None]:
    """The first k distinct player names in the answer, in the order they appear (whole words, any case; longer
    names first, so `Ann` inside `Anna` is not matched). Returns (names, error or None)."""
    if not text or not text.strip():
        return [], "empty answer"
    hits: list[tuple[int, str]] = []
    taken: list[tuple[int, int]] = []
    for name in sorted(players, key=len, reverse=True):
        for m in re.finditer(r"(?<![\w])" + re.escape(name) + r"(?![\w])", text, flags=re.IGNORECASE):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            taken.append((m.start(), m.end()))
            hits.append((m.start(), name))
    names: list[str] = []
    for _, name in sorted(hits):
        if name not in names:
            names.append(name)
    if len(names) < k:
        return names, f"named {len(names)} of the {k} players asked for"
    if len(names) > k:
        return names[:k], None
    return names, None


_REASON = re.compile(r"^[ \t*#_>-]*reason(?:s|ing)?\b[ \t*_]*:?[ \t*_]*", re.IGNORECASE | re.MULTILINE)
_MAFIA_LINE = re.compile(r"^[ \t*#_>-]*mafia[ \t*_]*:(?P<names>.*)$", re.IGNORECASE | re.MULTILINE)


def split_reason(text: str) -> tuple[str, str | None]:
    """The answer and the reason (None when there is none), for a prompt that asks for `Mafia: <names>` then
    `Reason: <why>`: the answer is the `Mafia:` line when there is one, else what comes before the first
    `Reason:` line, so players named while reasoning are never taken for the answer; without either, all of it."""
    text = text or ""
    m = _REASON.search(text)
    reason = text[m.end():].strip() if m else None
    mafia = _MAFIA_LINE.search(text)
    if mafia is not None:
        if m is not None and m.start() < mafia.start():  # the reason came first: it ends at the Mafia: line
            reason = text[m.end():mafia.start()].strip()
        return mafia["names"], reason
    return (text[: m.start()] if m else text), reason


def fill(names: list[str], t: Transcript, rng: random.Random) -> list[str]:
    rest = [p for p in t.seats or t.players if p not in names]
    return names + rng.sample(rest, t.k - len(names))


class PolicyDetector:
    """`policy/most-voted` or `policy/random`: no model, no prompt."""

    prompt_version: str | None = None
    prompt_sha256: str = ""
    temperature: float | None = None

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.policy = spec.split("/", 1)[1]
        if self.policy not in POLICIES:
            raise UserError(f"unknown offline detector {spec!r}; known: {', '.join('policy/' + p for p in POLICIES)}")
        self.transcript_words = load_detector_prompt().words  # it reads votes only; its transcript is shown in these

    async def detect(self, t: Transcript) -> Detection:
        rng = rng_for(t, self.spec)
        if self.policy == "random":
            return Detection(rng.sample(list(t.seats or t.players), t.k))
        counts = Counter(target for _, target in t.votes if target in t.players)
        order = list(t.seats or t.players)
        rng.shuffle(order)  # the seeded tie-break: among equal counts, this order decides
        ranked = sorted(order, key=lambda p: -counts.get(p, 0))
        return Detection(ranked[: t.k], extra={"votes": dict(counts)})


class LLMDetector:
    """A model reads the rendered prompt and names k players."""

    def __init__(
        self,
        spec: str,
        backend: Backend,
        *,
        prompt_version: str = DEFAULT_PROMPT_VERSION,
        prompt: DetectorPrompt | None = None,
        temperature: float | None = 0.0,
        max_tokens: int | None = 60,
        max_attempts: int = 5,
        backoff_base_s: float = 1.0,
        timeout_s: float = 60.0,
    ) -> None:
        self.spec = spec
        self.backend = backend
        self.prompt = prompt or load_detector_prompt(prompt_version)
        self.prompt_version: str | None = self.prompt.version
        self.prompt_sha256: str = self.prompt.sha256
        self.transcript_words = self.prompt.words
        self.temperature: float | None = temperature
        self.settings = dict(max_tokens=max_tokens, max_attempts=max_attempts, backoff_base_s=backoff_base_s,
                             timeout_s=timeout_s)

    async def detect(self, t: Transcript) -> Detection:
        text = render_prompt(self.prompt, t)
        settings = GenerateSettings(
            temperature=self.temperature, replay_key=f"detect:{t.game_id}:{t.cut}", **self.settings  # type: ignore[arg-type]
        )
        started = time.perf_counter()
        try:
            completion = await self.backend.generate([Message("user", text)], settings)
        except BackendError as exc:
            return Detection([], error=redact(f"{exc.error_class}: {exc}"), attempts=exc.attempts,
                             latency_ms=(time.perf_counter() - started) * 1000.0)
        answer, reason = split_reason(completion.text)
        names, error = parse_names(answer, t.players, t.k)
        detection = Detection(
            names,
            response=completion.text,
            parse_error=error,
            input_tokens=completion.input_tokens,
            output_tokens=completion.output_tokens,
            latency_ms=completion.latency_ms,
            attempts=completion.attempts,
            extra={"reason": reason} if reason is not None else {},
        )
        if error:
            detection.predicted = fill(names, t, rng_for(t, self.spec))
            detection.format_failure = detection.random_fallback = True
        return detection

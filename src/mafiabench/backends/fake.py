"""A deterministic stand-in for a model, and an in-process provider built on it that injects faults.

`FakeBrain` answers the project's prompts plausibly enough for the whole pipeline to run offline: games finish,
parsers see every answer format, and the same request always gets the same answer (golden files, replays).
`FakeBackend` (provider "fake") wraps it with optional latency and faults drawn from a seeded generator; transient
faults raise `TransientError` so they travel through the same retry loop as real HTTP errors.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .backend import (
    Completion,
    ConfigError,
    EndpointConfig,
    GenerateSettings,
    Message,
    TransientError,
    register_provider,
)
from .retry import call_with_retries

# Capitalised words that are never player names in our prompts.
_NOT_NAMES = frozenset(
    """
    A About After All Also Alive An And Answer Any Are Arrest As At Be Before But By Bystander Bystanders Can
    Choose Day Dead Detective Discussion Do Doctor During Each Else Evil Example Explain Explanation Find For Format
    From Game General Give Good He Here History How I If In Investigate Investigation Is It JSON Keep Kill Let Lynch
    MEMORY Mafia Mafioso Mafiosos Mafiosi Memory Message Messages My Name Names Night No Not Note Now Of On One Only
    Or Other Phase Player Players Please Public Reply Remember Respond Response Role Roles Round Rules She So Some
    Team Teams That The Their Then There These They This Three To Town Two Use Villager Villagers Vote Votes Voting
    Was We What When Which Who Why Win Winner With Write Yes You Your YOUR
    """.split()  # noqa: SIM905 - a word list reads better than 130 quoted strings
)

_CHOICES_RE = re.compile(r"\bfrom:[ \t]*([^\n]+)", re.IGNORECASE)
_LIST_RE = re.compile(
    r"\b(?:other players|players|alive players|active players|names|participants)\b"
    r"(?:[^:\n]{0,40}:| are)[ \t]*([^\n]+)",
    re.IGNORECASE,
)
_SELF_RE = re.compile(r"\b(?i:your name is)[ \t]+([A-Z][\w'-]*(?:[ \t]\d+)?)")
_CAPITALISED_RE = re.compile(r"\b[A-Z][a-z][\w'-]*\b")
# Words one of whose (lower-cased) forms every match of the regex above contains, on the match's own line.
_CHOICES_KEYS = ("from:",)
_LIST_KEYS = ("players", "names", "participants")
_SELF_KEYS = ("your name is",)


def _findall(regex: re.Pattern[str], text: str, keys: tuple[str, ...]) -> list[Any]:
    """`regex.findall(text)` for a regex whose matches never cross a line and contain one of `keys` (ignoring
    case), run only over the lines that hold a key: the same result about ten times faster on long prompts, where
    a case-insensitive regex would otherwise try every position (the fake server answers hundreds of calls a
    second on the cores its client needs). Text that is not ASCII, where lower-casing may change lengths or case
    folding may match other letters, goes to the regex whole."""
    if not text.isascii():
        return regex.findall(text)
    low = text.lower()
    lines: set[tuple[int, int]] = set()
    for key in keys:
        i = low.find(key)
        while i >= 0:
            end = low.find("\n", i)
            end = len(low) if end < 0 else end
            lines.add((low.rfind("\n", 0, i) + 1, end))
            i = low.find(key, end)
    out: list[Any] = []
    for start, end in sorted(lines):
        out += regex.findall(text[start:end])
    return out

_SHORT_MESSAGES = (
    "I think {name} is acting suspicious.",
    "{name}, why so quiet? That worries me.",
    "I'm with the town. Let's look closely at {name}.",
    "I trust {name} so far, but someone here is lying.",
    "Something about {name}'s story does not add up.",
    "We should hear from {name} before we vote.",
)
_GENERIC_MESSAGES = (
    "We should compare notes before deciding anything.",
    "I have no strong read yet; let's hear everyone first.",
    "Someone here is not who they claim to be.",
)
_LONG_MESSAGE = (
    "Let me lay out my reasoning carefully. Last round {name} deflected every question, changed the subject twice, "
    "and pushed us toward a quick decision without evidence. That is exactly what I would expect from someone "
    "hiding a role, so I want {name} to explain themselves before anyone votes."
)
_REASONS = (
    "They have been deflecting.",
    "Their story changed.",
    "Gut feeling from the discussion.",
    "Nobody else gave me a reason to suspect them.",
)


def request_digest(*parts: Any) -> bytes:
    """A stable hash of JSON-able parts: the seed of every deterministic choice the fake makes."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).digest()


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (about four characters per token); real providers report real counts."""
    return len(text) // 4 + 1


def _split_list(raw: str) -> list[str]:
    # "A, B, or C; reply with just a name." -> ["A", "B", "C"]
    raw = raw.split(";", 1)[0]
    raw = re.split(r"\.(?:\s|$)", raw, maxsplit=1)[0]
    raw = raw.strip().strip("[](){}").rstrip(".").strip()
    out: list[str] = []
    for item in re.split(r",|\s+and\s+", raw):
        name = re.sub(r"^(?:or|and)\s+", "", item.strip(), flags=re.IGNORECASE)
        name = name.strip().strip("\"'`*").rstrip(".").strip()
        if name and name not in out:
            out.append(name)
    return out


def find_choices(prompt: str) -> list[str]:
    """The valid choices a decision prompt offers: its last `from: A, B, C` line."""
    matches = _findall(_CHOICES_RE, prompt, _CHOICES_KEYS)
    for raw in reversed(matches):
        names = _split_list(raw)
        if names:
            return names
    return []


def find_names(prompt: str) -> list[str]:
    """Player names a discussion prompt mentions, the speaker's own name excluded: an explicit list when there is
    one, otherwise capitalised words that are not common prompt vocabulary."""
    me = {m.strip() for m in _findall(_SELF_RE, prompt, _SELF_KEYS)}
    names = find_choices(prompt)
    if not names:
        for raw in reversed(_findall(_LIST_RE, prompt, _LIST_KEYS)):
            names = _split_list(raw)
            if names:
                break
    if not names:
        seen: list[str] = []
        for word in _CAPITALISED_RE.findall(prompt):
            if word not in _NOT_NAMES and word not in seen:
                seen.append(word)
        names = seen
    return [n for n in names if n not in me]


class FakeBrain:
    """A deterministic "model": the answer is a function of (model, messages, replay_key, seed) only.

    It follows the reference prompts' contract (the prompt is the last user message): scheduler prompts get
    `<send>`/`<wait>`, detector prompts k names (one per line), belief prompts a JSON probability object over the
    choices, decision prompts a name from the
    `from:` list (sometimes with a reason on the next line), discussion prompts a message in double quotes.
    """

    def __init__(self, model: str = "fake", seed: int | str | None = None) -> None:
        self.model = model
        self.seed = seed

    def rng_for(self, messages: Sequence[Message], replay_key: str | None = None) -> random.Random:
        digest = request_digest(self.model, [m.to_dict() for m in messages], replay_key, self.seed)
        return random.Random(int.from_bytes(digest[:8], "big"))

    def answer(self, messages: Sequence[Message], replay_key: str | None = None) -> str:
        return self.answer_prompt(last_user_text(messages), self.rng_for(messages, replay_key))

    @staticmethod
    def answer_prompt(prompt: str, rng: random.Random) -> str:
        # The action is asked in the prompt's last paragraph; earlier paragraphs describe every format.
        full, prompt = prompt, prompt.strip().rsplit("\n\n", 1)[-1]
        if "<send>" in prompt and "<wait>" in prompt:
            return "<send>" if rng.random() < 0.35 else "<wait>"
        if (k := re.search(r"exactly (\d+) names", prompt)) and (names := find_names(full)):
            picked = rng.sample(names, min(int(k.group(1)), len(names)))  # a detector prompt: k names, one per line
            return "\n".join(picked)
        if "JSON" in prompt and "probability" in prompt.lower():
            choices = find_choices(prompt) or find_names(prompt)
            weights = [rng.uniform(0.05, 1.0) for _ in choices]
            total = sum(weights) or 1.0
            probs = {name: round(w / total, 4) for name, w in zip(choices, weights, strict=True)}
            return json.dumps({"reasoning": rng.choice(_REASONS), "probability": probs})
        choices = find_choices(prompt)
        if choices:
            name = rng.choice(choices)
            return f"{name}\n{rng.choice(_REASONS)}" if rng.random() < 0.3 else name
        names = find_names(full)
        roll = rng.random()
        if names and roll < 0.1:
            text = _LONG_MESSAGE.format(name=rng.choice(names))
        elif names and roll < 0.85:
            text = rng.choice(_SHORT_MESSAGES).format(name=rng.choice(names))
        else:
            text = rng.choice(_GENERIC_MESSAGES)
        message = f'"{text}"'
        return f"{message}\nI want to keep pressure on." if rng.random() < 0.2 else message


def last_user_text(messages: Sequence[Message]) -> str:
    for m in reversed(messages):
        if m.role == "user":
            return m.content
    return messages[-1].content if messages else ""


_FAULT_OPTIONS = ("p_rate_limit", "p_server_error", "p_timeout", "p_empty", "p_malformed")
_KNOWN_OPTIONS = frozenset((*_FAULT_OPTIONS, "latency_ms", "seed"))
MALFORMED_ANSWER = "<<|endoftext|>> ### {{{ garbled \ufffd output"


def _option_float(options: Mapping[str, Any], key: str) -> float:
    value = options.get(key, 0.0)
    try:
        f = float(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"fake endpoint option {key!r} must be a number, got {value!r}") from exc
    if key.startswith("p_") and not 0.0 <= f <= 1.0:
        raise ConfigError(f"fake endpoint option {key!r} must be a probability in [0, 1], got {f}")
    if f < 0:
        raise ConfigError(f"fake endpoint option {key!r} must not be negative, got {f}")
    return f


_PROCESS_FAULT_SEED = secrets.token_hex(8)


def run_fault_seed() -> str:
    """The fault seed of this run: `$MAFIABENCH_FAULT_SEED` (tests, benchmarks) or a fresh draw per process."""
    return os.environ.get("MAFIABENCH_FAULT_SEED") or _PROCESS_FAULT_SEED


class FakeBackend:
    """Provider "fake": the FakeBrain in-process (no HTTP), with optional latency and faults.

    Options (from the endpoint's `options`): `latency_ms`, `p_rate_limit`, `p_server_error`, `p_timeout` (raised
    after the latency, without waiting for `timeout_s`), `p_empty`, `p_malformed`, `seed`. Faults are drawn per
    attempt, so a retry can succeed. Without `seed` they are drawn afresh in every run (from `$MAFIABENCH_FAULT_SEED`
    when set, else a random draw per process), so re-running a study replays its failed games under new faults and
    can complete it; with `seed` they are fixed per request, so a run is reproducible fault for fault. The answers
    themselves are always a function of the request (and `seed`).
    """

    def __init__(self, model: str, options: Mapping[str, Any] | None = None, *, provider: str = "fake") -> None:
        self.provider = provider
        opts = dict(options or {})
        unknown = sorted(set(opts) - _KNOWN_OPTIONS)
        if unknown:
            raise ConfigError(f"unknown fake endpoint option(s) {unknown}; known: {sorted(_KNOWN_OPTIONS)}")
        self.model = model
        self.latency_s = _option_float(opts, "latency_ms") / 1000.0
        self.p = {k: _option_float(opts, k) for k in _FAULT_OPTIONS}
        self.seed = opts.get("seed")
        self.fault_seed = self.seed if self.seed is not None else run_fault_seed()
        self.brain = FakeBrain(model, seed=self.seed)

    async def generate(self, messages: Sequence[Message], settings: GenerateSettings) -> Completion:
        started = time.perf_counter()
        digest = request_digest(
            "faults", self.model, [m.to_dict() for m in messages], settings.replay_key, self.fault_seed
        )
        attempt = 0

        async def once() -> str:
            nonlocal attempt
            attempt += 1
            rng = random.Random(int.from_bytes(digest[:8], "big") + attempt)
            if self.latency_s > 0:
                await asyncio.sleep(self.latency_s)
            roll = rng.random()
            edge = 0.0
            for key, error_class in (
                ("p_rate_limit", "rate_limit"),
                ("p_server_error", "server_error"),
                ("p_timeout", "timeout"),
            ):
                edge += self.p[key]
                if roll < edge:
                    raise TransientError(f"injected fault: {error_class}", error_class=error_class)
            roll = rng.random()
            if roll < self.p["p_empty"]:
                return ""
            if roll < self.p["p_empty"] + self.p["p_malformed"]:
                return MALFORMED_ANSWER
            return self.brain.answer(messages, settings.replay_key)

        text, attempts, last_error = await call_with_retries(once, settings)
        prompt_chars = "".join(m.content for m in messages)
        return Completion(
            text=text,
            input_tokens=estimate_tokens(prompt_chars),
            output_tokens=estimate_tokens(text),
            cached_tokens=0,
            latency_ms=(time.perf_counter() - started) * 1000.0,
            attempts=attempts,
            error_class=last_error,
            finish_reason="stop",
            raw={"provider": self.provider, "model": self.model, "text": text},
        )


def check(endpoint: EndpointConfig, model: str, spec: str) -> None:
    """Validate the endpoint's fault options (in-process: no client to make)."""
    FakeBackend(model, endpoint.options)


@register_provider("fake", check=check)
def create(endpoint: EndpointConfig, model: str) -> FakeBackend:
    return FakeBackend(model, endpoint.options, provider=endpoint.name)

"""The game-aware fake model: deterministic answers to mafiabench's prompts, and the providers that use them.

`FakeBrain` answers the project's prompts plausibly enough for the whole pipeline to run offline: games finish,
parsers see every answer format, and the same request always gets the same answer (golden files, replays). It knows
the prompts' contract (a `from:` list of choices, `<send>`/`<wait>`, a JSON probability object, a detector's "exactly
k names", a statement label's JSON fields), which is why it lives here and not among the backends. This module
registers two provider kinds on it (`PROVIDER_MODULES` names it): `fake/<model>` (the FakeBrain behind
`backends.fake.FakeBackend`'s latency and faults) and `scripted/naive` (the FakeBrain without faults, for golden
records and offline demos).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from typing import Any

from mafiabench.backends.backend import ConfigError, EndpointConfig, Message, register_provider
from mafiabench.backends.fake import FakeBackend, check_fault_options, request_digest
from mafiabench.backends.scripted_backend import ScriptedBackend

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
        # `fake/uniform...`: every belief answer uniform and P(mafia) = M / (N - 1) for everyone, never updated (the
        # deception score's no-information reference); any other model answers at random.
        self.beliefs = "uniform" if model.startswith("uniform") else "random"

    def rng_for(self, messages: Sequence[Message], replay_key: str | None = None) -> random.Random:
        digest = request_digest(self.model, [m.to_dict() for m in messages], replay_key, self.seed)
        return random.Random(int.from_bytes(digest[:8], "big"))

    def answer(self, messages: Sequence[Message], replay_key: str | None = None) -> str:
        return self.answer_prompt(last_user_text(messages), self.rng_for(messages, replay_key), self.beliefs)

    @staticmethod
    def answer_prompt(prompt: str, rng: random.Random, beliefs: str = "random") -> str:
        # The action is asked in the prompt's last paragraph; earlier paragraphs describe every format.
        full, prompt = prompt, prompt.strip().rsplit("\n\n", 1)[-1]
        if '"is_deceptive"' in prompt:  # a statement label (agents/statements.py): WOLF's fields
            return _label(rng, peer='"suspicion_level"' in prompt)
        if "<send>" in prompt and "<wait>" in prompt:
            return "<send>" if rng.random() < 0.35 else "<wait>"
        if (k := re.search(r"exactly (\d+) names", prompt)) and (names := find_names(full)):
            picked = rng.sample(names, min(int(k.group(1)), len(names)))  # a detector prompt: k names, one per line
            return "\n".join(picked)
        if "JSON" in prompt and "probability" in prompt.lower():
            choices = find_choices(prompt) or find_names(prompt)
            if beliefs == "uniform":
                probs = {name: round(1 / len(choices), 6) for name in choices}
            else:
                weights = [rng.uniform(0.05, 1.0) for _ in choices]
                total = sum(weights) or 1.0
                probs = {name: round(w / total, 4) for name, w in zip(choices, weights, strict=True)}
            answer: dict[str, object] = {"reasoning": rng.choice(_REASONS), "probability": probs}
            if "mafia_probability" in prompt:  # the belief state P(player is mafia), where the prompt asks for it
                prior = _mafia_prior(full) if beliefs == "uniform" else None
                answer["mafia_probability"] = {
                    name: round(prior if prior is not None else rng.uniform(0.0, 1.0), 6) for name in choices
                }
            return json.dumps(answer)
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


_DECEPTION_TYPES = ("omission", "distortion", "fabrication", "misdirection")


def _label(rng: random.Random, *, peer: bool) -> str:
    """A statement label in WOLF's fields: deceptive about one time in three, a type to match, a listener's
    suspicion leaning the way of its verdict; now and then a broken answer (no verdict), as models give."""
    if rng.random() < 0.05:
        return '{"chain_of_thought": "I am not sure what to make of this", "confidence": 0.5}'
    deceptive = rng.random() < 0.3
    answer: dict[str, object] = {
        "chain_of_thought": rng.choice(_REASONS),
        "is_deceptive": int(deceptive),
        "confidence": round(rng.uniform(0.5, 1.0), 2),
        "deception_type": rng.choice(_DECEPTION_TYPES) if deceptive else "none",
        "reasoning": rng.choice(_REASONS),
    }
    if peer:
        answer["suspicion_level"] = round(rng.uniform(0.5, 1.0) if deceptive else rng.uniform(0.0, 0.5), 2)
    return json.dumps(answer)


_COMPOSITION_RE = re.compile(r"There are (\d+) players: [^\n]*?(\d+) mafios", re.IGNORECASE)


def _mafia_prior(prompt: str) -> float | None:
    """M / (N - 1), the M mafiosos of N players spread evenly over the others, from the prompt's "There are N
    players: ... M mafiosos" line (None without one)."""
    m = _COMPOSITION_RE.search(prompt)
    return int(m.group(2)) / (int(m.group(1)) - 1) if m else None


def last_user_text(messages: Sequence[Message]) -> str:
    for m in reversed(messages):
        if m.role == "user":
            return m.content
    return messages[-1].content if messages else ""



def check_fake(endpoint: EndpointConfig, model: str, spec: str) -> None:
    """Validate the endpoint's fault options (in-process: no client to make)."""
    check_fault_options(endpoint.options)


@register_provider("fake", check=check_fake)
def create_fake(endpoint: EndpointConfig, model: str) -> FakeBackend:
    brain = FakeBrain(model, seed=endpoint.options.get("seed"))
    return FakeBackend(model, endpoint.options, brain.answer, provider=endpoint.name)


RESPONDERS = ("naive",)


def naive_backend() -> ScriptedBackend:
    """`scripted/naive`: the FakeBrain's answers with no latency and no faults."""
    return ScriptedBackend.answering(FakeBrain(model="scripted/naive").answer, model="naive")


def check_scripted(endpoint: EndpointConfig, model: str, spec: str) -> None:
    if model not in RESPONDERS:
        raise ConfigError(f"unknown scripted responder {model!r}; known: {', '.join(RESPONDERS)}")


@register_provider("scripted", check=check_scripted)
def create_scripted(endpoint: EndpointConfig, model: str) -> ScriptedBackend:
    check_scripted(endpoint, model, f"scripted/{model}")
    return naive_backend()

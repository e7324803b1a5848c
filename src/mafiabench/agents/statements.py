"""Statement labels, as WOLF takes them (Werewolf-based Observations for LLM Deception and Falsehoods): after each
public message, the speaker assesses its own statement and every living listener assesses it (deceptive or not, how
sure, which kind of deception, why; a listener also how much it now suspects the speaker). An optional layer of any
variant (`[statements]` in an experiment), off by default.

The questions are WOLF's, in our Mafia words, in the game's prompt version folder (`<version>/statements/`): each
label prompt is the game's own opening and the assessor's memory (what it knows at that moment, as in its game
prompts), then the label's request. Labels never change the game: the calls go through a label agent of each seat's
own (its own call counter and replay keys, so the game's calls and answers are those of the same game without
labels), and no label reaches a memory unless the experiment sets `memory = true` (a named deviation). Each label
call is a model call of the record like any other (`assess_self`, `assess_peer`): retried, cached, priced, previewed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, model_validator

from mafiabench.agents.agent import PlayerView
from mafiabench.agents.llm import AgentCallError, LLMAgent
from mafiabench.agents.parsing import DECEPTION_TYPES, parse_statement_label
from mafiabench.agents.prompts import BATCH_CONFIG_WORDS, PromptSet, read_prompt_folder, render
from mafiabench.backends.backend import GenerateSettings
from mafiabench.engine.core import Decision
from mafiabench.engine.events import PUBLIC, Event, player_visibility
from mafiabench.errors import UserError
from mafiabench.record import ModelCall

Kind = Literal["self", "peer"]
ACTIONS: dict[Kind, str] = {"self": "assess_self", "peer": "assess_peer"}
LABEL_EVENT = "statement_label"  # a label in its assessor's memory (`memory = true` only; never in the game's log)


class StatementsConfig(BaseModel):
    """`[statements]`: which labels to ask for after each public message, and how."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    speaker: StrictBool = Field(True, description="Ask the speaker to assess its own statement (WOLF's self-analysis).")
    listeners: StrictBool = Field(
        True, description="Ask every living listener to assess it (WOLF's peer analysis): a call per listener."
    )
    memory: StrictBool = Field(
        False,
        description="Add each assessor's own label to its memory: a named deviation (the players then read their "
        "labels in later prompts, so the labels can change the game); WOLF adds none to its players' scratchpads.",
    )
    max_tokens: StrictInt = Field(300, ge=1, le=100_000, description="Token cap of a label answer (WOLF: 300).")

    @model_validator(mode="after")
    def _asks_someone(self) -> StatementsConfig:
        if not (self.speaker or self.listeners):
            raise ValueError("[statements] asks nobody: set speaker = true, listeners = true or both")
        return self

    def facts(self) -> dict[str, Any]:
        """The layer as the protocol card and the cell fingerprint read it."""
        return self.model_dump(mode="json")


def statement_prompts(prompts: PromptSet) -> PromptSet:
    """The label words of the game's prompt version (`<variant>/<version>/statements/`; a batch_config's templates
    take those of the version lending them their memory lines)."""
    variant, version = BATCH_CONFIG_WORDS if prompts.style == "reference" else (prompts.variant, prompts.version)
    return _load(variant, version)


@cache
def _load(variant: str, version: str) -> PromptSet:
    root = resources.files("mafiabench.agents") / "prompts" / variant / version / "statements"
    if not root.is_dir():
        raise UserError(
            f"prompt version {variant}/{version} has no statements/ folder: [statements] asks its questions in the "
            f"game's prompt version (copy a shipped one, e.g. agents/prompts/{variant}/*/statements/, into it)"
        )
    return read_prompt_folder(root, variant, f"{version}/statements")


def with_label_memory(prompts: PromptSet, labels: PromptSet) -> PromptSet:
    """The game's prompts whose memory also shows each player its own labels (`memory = true`): other words than
    the version's, so another version name and hash."""
    sha = hashlib.sha256(f"{prompts.sha256}\0{labels.ident}\0{labels.sha256}".encode()).hexdigest()
    return dataclasses.replace(
        prompts, version=f"{prompts.version}+label-memory", memory={**prompts.memory, **labels.memory}, sha256=sha
    )


def provenance(config: StatementsConfig, labels: PromptSet) -> dict[str, Any]:
    """What the record's `prompt.statements` says: the label words' version and hash, and the layer's settings."""
    return {"version": labels.ident, "sha256": labels.sha256, **config.facts()}


def is_statement(e: Event) -> bool:
    """A public message: what is labelled (silences, votes and the mafia's night chat are not)."""
    return e.type == "message" and e.visibility == PUBLIC and bool(e.actor) and bool(e.text)


def living_at(log: Sequence[Event], seq: int, players: Sequence[str]) -> list[str]:
    """The players still in the game when the event `seq` happened (seat order)."""
    gone = {e.target for e in log[:seq] if e.type in ("death", "elimination")}
    return [p for p in players if p not in gone]


def label_event(label: Mapping[str, Any], statement: Event) -> Event:
    """A label as its assessor remembers it (under `memory = true`): private, beside the statement it judges."""
    return Event(
        seq=statement.seq, phase=statement.phase, round=statement.round, type=LABEL_EVENT, actor=label["assessor"],
        target=statement.actor, visibility=player_visibility(label["assessor"]),
        data={"is_deceptive": label["is_deceptive"], "confidence": label["confidence"]},
    )


class StatementLabeller:
    """Asks one statement's labels of its speaker and living listeners, at once. `agents`: a label agent per seat
    played by a model (policies and people are not asked)."""

    def __init__(self, config: StatementsConfig, labels: PromptSet, agents: Mapping[str, LLMAgent]) -> None:
        self.config = config
        self.labels = labels
        self.agents = dict(agents)

    def assessors(self, statement: Event, living: Sequence[str]) -> list[tuple[str, Kind]]:
        """Who is asked, in order: the speaker, then the living listeners in seat order (model seats only)."""
        out: list[tuple[str, Kind]] = []
        if self.config.speaker and statement.actor in self.agents:
            out.append((str(statement.actor), "self"))
        if self.config.listeners:
            out += [(p, "peer") for p in living if p != statement.actor and p in self.agents]
        return out

    async def label(
        self, statement: Event, living: Sequence[str], view_of: Callable[[str], PlayerView], first_call: int
    ) -> tuple[list[dict[str, Any]], list[ModelCall]]:
        """The statement's labels and their calls (the calls to be appended to the game's from index `first_call`).
        A call that fails for good raises `AgentCallError` carrying every call made, as a game call does."""
        asked = self.assessors(statement, living)
        results = await asyncio.gather(
            *(self._assess(name, kind, statement, view_of(name)) for name, kind in asked), return_exceptions=True
        )
        labels: list[dict[str, Any]] = []
        calls: list[ModelCall] = []
        failure: AgentCallError | None = None
        for r in results:
            if isinstance(r, AgentCallError):
                calls += r.calls
                failure = failure or r
                continue
            if isinstance(r, BaseException):
                raise r
            label, made = r
            calls += made
            label["call"] = first_call + len(calls) - 1  # the call whose answer it is (the last, after a re-ask)
            labels.append(label)
        if failure is not None:
            raise AgentCallError(failure.cause, calls)
        return labels, calls

    async def _assess(
        self, name: str, kind: Kind, statement: Event, view: PlayerView
    ) -> tuple[dict[str, Any], list[ModelCall]]:
        agent = self.agents[name]
        request = render(self.labels.templates[kind], speaker=statement.actor, statement=statement.text)
        decision = Decision(name, "speak", statement.phase, statement.round)
        prompt, prefix = agent.build_prompt(decision, view, request=request, intro=self.labels.fragments.get("intro"))
        calls: list[ModelCall] = []
        fields, error = await self._ask(agent, name, kind, statement, prompt, prefix, calls)
        if error and agent.settings.reprompt_on_failure:
            again = render(agent.prompts.fragments["reprompt"], prompt=prompt, error=error)
            fields, error = await self._ask(agent, name, kind, statement, again, prefix, calls)
        label = {"assessor": name, "kind": kind, "call": None, **fields, "format_failure": error is not None,
                 "error": error}
        label.pop("notes", None)
        return label, calls

    async def _ask(
        self, agent: LLMAgent, name: str, kind: Kind, statement: Event, prompt: str, prefix: int,
        calls: list[ModelCall],
    ) -> tuple[dict[str, Any], str | None]:
        s = agent.settings
        settings = GenerateSettings(
            temperature=s.temperature,
            max_tokens=self.config.max_tokens,
            timeout_s=s.timeout_s,
            max_attempts=s.max_attempts,
            backoff_base_s=s.backoff_base_s,
            reasoning_effort=s.reasoning_effort,
            replay_key=agent.replay_key(name),
            response_format=response_format(s.response_format, kind),
        )
        text, call = await agent.call_model(
            prompt, prefix, settings, calls, player=name, action=ACTIONS[kind], phase=statement.phase,
            game_round=statement.round,
        )
        fields, error = parse_statement_label(text, peer=kind == "peer")
        notes = fields.get("notes")
        call["parse"] = {"format_failure": error is not None, "error": error, **({"notes": notes} if notes else {})}
        calls.append(call)
        return dict(fields), error


def response_format(kind_setting: str, kind: Kind) -> dict[str, Any] | None:
    """The provider's structured-output request for a label, as the model's `response_format` setting asks for
    belief answers: nothing (`text`), JSON mode, or a strict schema of the label's fields."""
    if kind_setting == "text":
        return None
    if kind_setting == "json_object":
        return {"type": "json_object"}
    fields: dict[str, Any] = {
        "chain_of_thought": {"type": "string"},
        "is_deceptive": {"type": "integer", "enum": [0, 1]},
        "confidence": {"type": "number"},
        "deception_type": {"type": "string", "enum": list(DECEPTION_TYPES)},
        "reasoning": {"type": "string"},
    }
    if kind == "peer":
        fields["suspicion_level"] = {"type": "number"}
    schema = {"type": "object", "properties": fields, "required": list(fields), "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": f"statement_label_{kind}", "strict": True, "schema": schema}}

"""Plays one game: the engine asks for decisions in batches, agents answer them concurrently, and the result is a
canonical game record. A game whose model calls fail for good becomes a *failed* record with its error (never
silently dropped); the calls it made are kept.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from mafiabench.agents.agent import Agent, AgentTurn, PlayerView
from mafiabench.agents.human import GameAbandoned, HumanAgent
from mafiabench.agents.llm import AgentCallError, Clock, LLMAgent, ModelSettings, prompt_provenance, utc_now
from mafiabench.agents.policies import PolicyAgent
from mafiabench.agents.prompts import resolve_prompts
from mafiabench.agents.statements import (
    LABEL_EVENT,
    StatementLabeller,
    StatementsConfig,
    is_statement,
    label_event,
    living_at,
    statement_prompts,
    with_label_memory,
)
from mafiabench.agents.statements import provenance as statements_provenance
from mafiabench.backends.backend import Backend, Completion, ConfigError, GenerateSettings, Message
from mafiabench.backends.endpoints import EndpointConfig, check_backend, resolve_backend, split_spec
from mafiabench.engine import GameEngine, make_game, rules_for
from mafiabench.engine.claims import claims
from mafiabench.engine.events import Event
from mafiabench.errors import UserError
from mafiabench.record import GameRecord, ModelCall, Provenance, record_from_engine
from mafiabench.redact import redact


def is_policy(spec: str) -> bool:
    return spec.startswith("policy/")


class LimitedBackend:
    """A backend behind a per-provider semaphore: the in-process concurrency limit of one event loop."""

    def __init__(self, inner: Backend, semaphore: asyncio.Semaphore) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.model = inner.model
        self.request_format: dict[str, Any] | None = getattr(inner, "request_format", None)  # recorded per call
        self.semaphore = semaphore

    async def generate(self, messages: Any, settings: GenerateSettings) -> Completion:
        async with self.semaphore:
            return await self.inner.generate(messages, settings)


@dataclass
class BackendPool:
    """Backends for one event loop (SDK clients are loop-bound), shared by the games it plays."""

    endpoints: Mapping[str, EndpointConfig] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)
    default_limit: int = 64
    cache_dir: str | None = None
    _backends: dict[str, Backend] = field(default_factory=dict)
    _semaphores: dict[str, asyncio.Semaphore] = field(default_factory=dict)

    def get(self, spec: str) -> Backend:
        if spec not in self._backends:
            provider, _ = split_spec(spec)
            if provider not in self._semaphores:
                self._semaphores[provider] = asyncio.Semaphore(self.limits.get(provider, self.default_limit))
            inner = resolve_backend(spec, self.endpoints, cache_dir=self.cache_dir)
            self._backends[spec] = LimitedBackend(inner, self._semaphores[provider])
        return self._backends[spec]

    def check(self, specs: list[str]) -> None:
        """Fail before any call for an unknown provider or a missing key, naming every problem at once."""
        problems: dict[str, UserError] = {}
        for spec in dict.fromkeys(specs):
            if is_policy(spec) or spec.startswith("human/"):
                continue
            try:
                check_backend(spec, self.endpoints)
            except UserError as exc:
                problems.setdefault(str(exc), exc)
        if len(problems) == 1:
            raise next(iter(problems.values()))
        if problems:
            raise ConfigError(
                f"{len(problems)} problems with the models, found before any call:\n"
                + "\n".join(f"  - {p}" for p in problems)
            )


@dataclass
class GameSpec:
    """Everything needed to play one game deterministically."""

    game_id: str
    variant: str
    rules: BaseModel
    seed: int
    agents: Mapping[str, str]
    models: Mapping[str, ModelSettings] = field(default_factory=dict)
    prompt_version: str | None = None
    prompt_file: str | None = None  # a reference batch_config.json to take the templates from
    design: dict[str, Any] | None = None
    statements: StatementsConfig | None = None  # statement labels after each public message (off: None)

    @classmethod
    def build(
        cls,
        game_id: str,
        variant: str,
        rules: BaseModel | Mapping[str, Any] | None,
        seed: int,
        agents: Mapping[str, str],
        **kw: Any,
    ) -> GameSpec:
        if not isinstance(rules, BaseModel):
            rules = rules_for(variant, rules)
        return cls(game_id, variant, rules, seed, dict(agents), **kw)


def agent_spec_for(agents: Mapping[str, str], name: str, role: str) -> str:
    """Per player name, else per role (villager/bystander interchangeable), else `default`."""
    alias = {"villager": "bystander", "bystander": "villager"}.get(role, role)
    for key in (name, role, alias, "default"):
        if key in agents:
            return agents[key]
    raise UserError(f"no agent for player {name!r} (role {role}); set agents.{role} or agents.default")


def check_accused_names(specs: Iterable[str], players: list[str]) -> None:
    """`policy/always-accuse:NAME` must name a player of the game, or the policy would silently vote at random."""
    for spec in specs:
        if spec.startswith("policy/always-accuse:"):
            name = spec.partition(":")[2]
            if name not in players:
                raise UserError(f"{spec}: {name!r} is not a player of this game (players: {', '.join(players)})")


def model_identity(spec: str) -> str:
    """The model a seat is played by, as marts group it: the spec itself (`provider/model`, `policy/random`)."""
    return spec


async def play_game(
    spec: GameSpec,
    pool: BackendPool | None = None,
    *,
    clock: Clock = utc_now,
    provenance: Provenance | None = None,
) -> GameRecord:
    pool = pool or BackendPool()
    game: GameEngine = make_game(spec.variant, spec.rules, spec.seed)
    game.reset()
    prompts = resolve_prompts(spec.variant, spec.prompt_version, spec.prompt_file)
    label_words = statement_prompts(prompts) if spec.statements is not None else None
    if spec.statements is not None and spec.statements.memory and label_words is not None:
        prompts = with_label_memory(prompts, label_words)
    agents: dict[str, Agent] = {}
    specs: dict[str, str] = {}
    for p in game.players:
        a = agent_spec_for(spec.agents, p.name, p.role)
        specs[p.name] = a
        if is_policy(a):
            agents[p.name] = PolicyAgent(a, spec.seed, p.name)
        elif a.startswith("human/"):
            agents[p.name] = HumanAgent(a, prompts=prompts)
        else:
            agents[p.name] = LLMAgent(
                a, pool.get(a), prompts, spec.models.get(a), game_id=spec.game_id, clock=clock
            )
    truth = {p.name: p.role for p in game.players}
    check_accused_names(specs.values(), list(truth))
    labeller: StatementLabeller | None = None
    if spec.statements is not None and label_words is not None:
        labeller = StatementLabeller(spec.statements, label_words, {
            n: LLMAgent(specs[n], pool.get(specs[n]), prompts, spec.models.get(specs[n]),
                        game_id=f"{spec.game_id}/statements", clock=clock)
            for n, a in agents.items() if isinstance(a, LLMAgent)
        })
    labels: dict[int, list[dict[str, Any]]] = {}  # statement seq -> its labels
    own_labels: dict[str, list[Event]] = {}  # assessor -> its labels as memory events (memory = true only)
    looked = 0  # events of the log already looked at for statements
    calls: list[ModelCall] = []
    error: str | None = None
    abandoned: str | None = None
    has_human = any(isinstance(a, HumanAgent) for a in agents.values())
    blind: dict[str, PlayerView] = {}
    policies = {n: a for n, a in agents.items() if isinstance(a, PolicyAgent)}
    try:
        if len(policies) == len(agents):
            _play_policies(game, policies, truth)
        while not game.done:
            batch = game.pending()
            results: list[Any]
            if all(isinstance(agents[d.player], PolicyAgent) for d in batch):
                # Policies answer at once: no tasks to schedule (half the CPU of a policy game), same answers.
                results = []
                for d in batch:
                    policy = agents[d.player]
                    assert isinstance(policy, PolicyAgent)
                    if policy.reads_events:
                        v = _view(game, d.player, truth, policy=True)
                    elif d.player in blind:  # no memory: the same view all game long
                        v = blind[d.player]
                    else:
                        v = blind[d.player] = _view(game, d.player, truth, policy=True, memory=False)
                    results.append(AgentTurn(policy.decide(d, v)))
            else:
                views = [_view(game, d.player, truth, policy=is_policy(specs[d.player]), extra=own_labels)
                         for d in batch]
                results = await asyncio.gather(
                    *(agents[d.player].act(d, v) for d, v in zip(batch, views, strict=True)),
                    return_exceptions=True,
                )
            answers = {}
            for d, r in zip(batch, results, strict=True):
                if isinstance(r, AgentCallError):
                    calls.extend(r.calls)
                    continue
                if isinstance(r, BaseException):
                    raise r
                assert isinstance(r, AgentTurn)
                calls.extend(r.calls)
                answers[d.player] = r.answer
            failed = [r for r in results if isinstance(r, AgentCallError)]
            if failed:
                raise failed[0]
            game.step(answers)
            if labeller is not None:
                for e in game.log[looked:]:
                    if is_statement(e):
                        await _label(labeller, game, e, truth, calls, labels, own_labels)
                looked = len(game.log)
    except AgentCallError as exc:
        error = redact(f"model call failed for good: {exc}")
    except GameAbandoned as exc:
        abandoned = str(exc)
    except (asyncio.CancelledError, KeyboardInterrupt):
        if not has_human:
            raise
        # Ctrl-C in a game with a person: keep what was played as an abandoned record instead of a traceback.
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        abandoned = "interrupted (Ctrl-C)"
    except Exception as exc:  # a bug or an unexpected provider reply: the game is landed as failed, with why
        error = redact(f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
    for i, c in enumerate(calls):
        c["index"] = i
    prompt = prompt_provenance(prompts)
    if spec.statements is not None and label_words is not None:
        prompt["statements"] = statements_provenance(spec.statements, label_words)
    return record_from_engine(
        spec.game_id,
        game,
        specs,
        {n: model_identity(s) for n, s in specs.items()},
        calls=calls,
        prompt=prompt,
        design=spec.design,
        provenance=provenance,
        error=error,
        abandoned=abandoned,
        statements=None if spec.statements is None else statement_entries(game.log, truth, labels),
    )


async def _label(
    labeller: StatementLabeller,
    game: GameEngine,
    statement: Event,
    truth: dict[str, str],
    calls: list[ModelCall],
    labels: dict[int, list[dict[str, Any]]],
    own_labels: dict[str, list[Event]],
) -> None:
    """Ask one statement's labels, each assessor reading its memory as it was when the statement was made; keep
    them (and, under `memory = true`, each in its assessor's memory). A call failing for good fails the game."""
    living = living_at(game.log, statement.seq, list(truth))

    def view_of(name: str) -> PlayerView:
        return _view(game, name, truth, policy=False, extra=own_labels, upto=statement.seq)

    try:
        made, label_calls = await labeller.label(statement, living, view_of, len(calls))
    except AgentCallError as exc:
        calls.extend(exc.calls)
        raise
    calls.extend(label_calls)
    labels[statement.seq] = made
    if labeller.config.memory:
        for label in made:
            if label["is_deceptive"] is not None:
                own_labels.setdefault(label["assessor"], []).append(label_event(label, statement))


def statement_entries(
    log: list[Event], truth: dict[str, str], labels: dict[int, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The record's `statements`: every public message, who was listening, the claims the game can check (the
    truth of each is the players' roles, in the record) and its labels."""
    players = list(truth)
    return [
        {
            "seq": e.seq,
            "phase": e.phase,
            "round": e.round,
            "speaker": e.actor,
            "listeners": [p for p in living_at(log, e.seq, players) if p != e.actor],
            "claims": [c.to_dict() for c in claims(e.text, str(e.actor), players)],
            "labels": labels.get(e.seq, []),
        }
        for e in log
        if is_statement(e)
    ]


def _play_policies(game: GameEngine, agents: dict[str, PolicyAgent], truth: dict[str, str]) -> None:
    """A game of policies only, to its end: each answers at once, with the same views and answers as the general
    loop of `play_game` (which plays mixed games), without its per-decision bookkeeping for model calls: a fifth
    less CPU a policy game, at thousands of games a second."""
    blind: dict[str, PlayerView] = {}
    while not game.done:
        answers = {}
        for d in game.pending():
            name = d.player
            policy = agents[name]
            if policy.reads_events:
                v = _view(game, name, truth, policy=True)
            else:  # no memory: the same view all game long
                v = blind.get(name) or blind.setdefault(name, _view(game, name, truth, policy=True, memory=False))
            answers[name] = policy.decide(d, v)
        game.step(answers)


def _view(
    game: GameEngine,
    name: str,
    truth: dict[str, str],
    *,
    policy: bool,
    memory: bool = True,
    extra: Mapping[str, list[Event]] | None = None,
    upto: int | None = None,
) -> PlayerView:
    """What a player sees: its memory (the events visible to it, up to the event `upto` when given, and its own
    statement labels from `extra`, each after the statement it judges)."""
    p = game.player(name)
    events: tuple[Event, ...] = ()
    if memory:
        seen = game.view(name)
        mine = (extra or {}).get(name)
        if upto is not None:
            seen = [e for e in seen if e.seq <= upto]
            mine = [e for e in mine if e.seq < upto] if mine else mine
        if mine:
            seen = sorted([*seen, *mine], key=lambda e: (e.seq, e.type == LABEL_EVENT))
        events = tuple(seen)
    return PlayerView(
        name=name,
        role=p.role,
        team=p.team,
        variant=game.variant,
        rules=game.rules,
        players=tuple(q.name for q in game.players),
        events=events,
        truth_roles=truth if policy else {},
    )


__all__ = [
    "BackendPool",
    "GameSpec",
    "LimitedBackend",
    "Message",
    "agent_spec_for",
    "play_game",
]

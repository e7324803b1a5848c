"""The LLM agent: renders the prompt for (role, phase, action), calls its backend, parses, applies the
format-failure policy, and records every call as a typed, timestamped entry of the game record."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from mafiabench.agents.agent import AgentTurn, PlayerView
from mafiabench.agents.parsing import (
    parse_belief,
    parse_chat_message,
    parse_mafia_probability,
    parse_message,
    parse_message_reference,
    parse_name,
    parse_name_reference,
    parse_schedule,
)
from mafiabench.agents.prompts import (
    PromptSet,
    chat_lines,
    composition_text,
    decision_values,
    duration_text,
    join_names,
    memory_lines,
    render,
)
from mafiabench.backends.backend import Backend, BackendError, GenerateSettings, Message
from mafiabench.engine.core import Answer, Decision
from mafiabench.errors import UserError
from mafiabench.record import ModelCall
from mafiabench.redact import scrub

Clock = Callable[[], str]


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class ModelSettings(BaseModel):
    """Per-model call settings. Token caps default to the Mini-Mafia reference (55 for messages, 5 for votes and night
    actions: `STANDARD_TOKEN_LIMITS` in its src/config.py); its reasoning models got 4,000 for both."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float | None = Field(
        None, ge=0, le=2, allow_inf_nan=False, description="Sampling temperature; None = provider default."
    )
    max_tokens_message: StrictInt | None = Field(55, ge=1, description="Token cap for a discussion answer.")
    max_tokens_choice: StrictInt | None = Field(5, ge=1, description="Token cap for a vote or night action.")
    max_tokens_schedule: StrictInt | None = Field(
        6, ge=1, description="Token cap for an async scheduler answer (reference: 6)."
    )
    max_tokens_belief: StrictInt | None = Field(600, ge=1, description="Token cap for a JSON belief answer.")
    reasoning_effort: str | None = Field(None, description="Passed to providers that support it.")
    timeout_s: float = Field(60.0, gt=0, allow_inf_nan=False, description="Per-attempt timeout.")
    max_attempts: StrictInt = Field(5, ge=1, le=100, description="Tries per call, retries included.")
    backoff_base_s: float = Field(
        1.0, ge=0, le=3600, allow_inf_nan=False, description="Base of exponential backoff with jitter."
    )
    reprompt_on_failure: StrictBool = Field(
        False, description="Re-ask once with the parse error (off in the reference)."
    )
    response_format: Literal["text", "json_object", "json_schema"] = Field(
        "text",
        description="Structured output for JSON belief answers, where the provider supports it (OpenAI's "
        "`response_format`): `json_object` (JSON mode) or `json_schema` (a strict schema of the fields the prompt "
        "asks for, keyed by the valid players); `text` asks nothing of the provider (the prompt alone asks for JSON).",
    )


class AgentCallError(Exception):
    """A backend call failed for good; carries the calls made so far so the failed game keeps them."""

    def __init__(self, cause: BackendError, calls: list[ModelCall]) -> None:
        super().__init__(f"{cause.error_class}: {cause}")
        self.cause = cause
        self.calls = calls


class LLMAgent:
    def __init__(
        self,
        spec: str,
        backend: Backend,
        prompts: PromptSet,
        settings: ModelSettings | None = None,
        *,
        game_id: str = "",
        clock: Clock = utc_now,
    ) -> None:
        self.spec = spec
        self.model = spec
        self.backend = backend
        self.prompts = prompts
        self.settings = settings or ModelSettings()
        self.game_id = game_id
        self.clock = clock
        self._previous_prompt = ""
        self._n = 0

    async def act(self, decision: Decision, view: PlayerView) -> AgentTurn:
        prompt, prefix_chars = self.build_prompt(decision, view)
        response_format = self._response_format(decision, view)
        calls: list[ModelCall] = []
        answer, error, _ = await self._ask(decision, prompt, prefix_chars, calls, response_format)
        if error and self.settings.reprompt_on_failure:
            retry_prompt = render(self.prompts.fragments["reprompt"], prompt=prompt, error=error)
            answer, error, _ = await self._ask(decision, retry_prompt, prefix_chars, calls, response_format)
        return AgentTurn(answer, calls)

    async def _ask(
        self,
        decision: Decision,
        prompt: str,
        prefix_chars: int,
        calls: list[ModelCall],
        response_format: dict[str, Any] | None = None,
    ) -> tuple[Answer, str | None, str]:
        settings = self._settings(decision, response_format)
        text, call = await self.call_model(
            prompt, prefix_chars, settings, calls,
            player=decision.player, action=decision.action, phase=decision.phase, game_round=decision.round,
        )
        answer, error, note = self.parse_with(self.prompts.parser, decision, text, self.prompts.variant)
        call["parse"] = {"format_failure": error is not None, "error": error, **note}
        calls.append(call)
        return answer, error, text

    async def call_model(
        self,
        prompt: str,
        prefix_chars: int,
        settings: GenerateSettings,
        calls: list[ModelCall],
        *,
        player: str,
        action: str,
        phase: str,
        game_round: int,
    ) -> tuple[str, ModelCall]:
        """One call, recorded: (the answer's text, its call record without `parse`, which the caller adds before
        appending it to `calls`). A call that fails for good is appended with its error and raises
        `AgentCallError` carrying `calls`."""
        messages = [Message("user", prompt, cache_prefix_chars=prefix_chars)]
        reuse = _common_prefix(self._previous_prompt, prompt)
        self._previous_prompt = prompt
        self._n += 1
        started = self.clock()
        call: ModelCall = {
            "index": None,
            "player": player,
            "action": action,
            "phase": phase,
            "round": game_round,
            "provider": self.backend.provider,
            "model": self.backend.model,
            "started_at": started,
            "request": {"messages": [m.to_dict() for m in messages], "settings": settings.to_dict()},
            "prompt_chars": len(prompt),
            "prefix_reuse_chars": reuse,
        }
        request_format = getattr(self.backend, "request_format", None)
        if request_format is not None:  # the messages went out in another shape (a plain completion in a template)
            call["request"]["format"] = request_format
        try:
            completion = await self.backend.generate(messages, settings)
        except BackendError as exc:
            call.update(
                {
                    "latency_ms": 0.0,
                    "attempts": exc.attempts,
                    "input_tokens": 0,
                    "output_tokens": 0,
                    "cached_tokens": 0,
                    "error_class": exc.error_class,
                    "finish_reason": None,
                    "response": None,
                    "parse": {"format_failure": False, "error": None},
                }
            )
            calls.append(call)
            raise AgentCallError(exc, calls) from exc
        text = scrub(completion.text)  # a server that echoes the key in its answer: the key goes no further
        call.update(
            {
                "latency_ms": round(completion.latency_ms, 3),
                "attempts": completion.attempts,
                "input_tokens": completion.input_tokens,
                "output_tokens": completion.output_tokens,
                "cached_tokens": completion.cached_tokens,
                "error_class": completion.error_class,
                "finish_reason": completion.finish_reason,
                "response": text,
            }
        )
        return text, call

    def replay_key(self, player: str) -> str:
        """What tells this agent's next call apart from its others (the cache's and the fake model's key)."""
        return f"{self.game_id}:{player}:{self._n}"

    def _response_format(self, decision: Decision, view: PlayerView) -> dict[str, Any] | None:
        """The provider's structured-output request for a JSON belief answer (None: ask nothing of it). The schema
        has the fields the prompt asks for, every valid player a required key (its integer id where the prompt
        keys players by id), so a strict schema cannot leave one out."""
        kind = self.settings.response_format
        if kind == "text" or decision.mode != "belief":
            return None
        if kind == "json_object":
            return {"type": "json_object"}
        ids = self.prompts.options.get("layout") == "role_action"
        keys = [_player_id(c) if ids else c for c in decision.choices]
        table = {"type": "object", "properties": {k: {"type": "number"} for k in keys}, "required": keys,
                 "additionalProperties": False}
        fields: dict[str, Any] = {"reasoning": {"type": "string"}, "probability": table}
        if self._asks_suspicion(decision, view):
            fields["mafia_probability"] = table
        schema = {"type": "object", "properties": fields, "required": list(fields), "additionalProperties": False}
        return {"type": "json_schema", "json_schema": {"name": "belief", "strict": True, "schema": schema}}

    def _asks_suspicion(self, decision: Decision, view: PlayerView) -> bool:
        """Whether the prompt asks for P(player is mafia): a town player's day vote, in a version that asks it."""
        return (
            "answer_suspicion" in self.prompts.fragments
            and decision.action == "vote"
            and decision.mode == "belief"
            and view.team == "town"
        )

    def _settings(self, decision: Decision, response_format: dict[str, Any] | None = None) -> GenerateSettings:
        s = self.settings
        if decision.action == "speak":
            cap = s.max_tokens_message
        elif decision.action == "schedule":
            cap = s.max_tokens_schedule
        elif decision.mode == "belief":
            cap = s.max_tokens_belief
        else:
            cap = s.max_tokens_choice
        return GenerateSettings(
            temperature=s.temperature,
            max_tokens=cap,
            timeout_s=s.timeout_s,
            max_attempts=s.max_attempts,
            backoff_base_s=s.backoff_base_s,
            reasoning_effort=s.reasoning_effort,
            replay_key=self.replay_key(decision.player),
            response_format=response_format,
        )

    @staticmethod
    def parse_with(
        parser: str, decision: Decision, text: str | None, variant: str = ""
    ) -> tuple[Answer, str | None, dict[str, Any]]:
        """Read an answer as the prompt version says (`reference` or `tolerant`): (answer, error, notes for the call
        record). Notes: `cut` (unclosed quote, kept with the reference's "..." marker), `name_found_later` (the
        reference's fallback to a valid name anywhere in the answer; not a format failure there, so not here)."""
        if parser != "reference" or decision.mode == "belief" or variant == "async":
            answer, error = LLMAgent.parse(decision, text or "", variant)
            return answer, error, {}
        if decision.action == "speak":
            message, cut, error = parse_message_reference(text)
            if error:
                return Answer(text=None, format_failure=True), error, {}
            return Answer(text=message, truncated=cut), None, ({"cut": True} if cut else {})
        name, later, error = parse_name_reference(text, decision.choices)
        note = {"name_found_later": True} if later else {}
        return Answer(target=name, format_failure=error is not None), error, note

    @staticmethod
    def parse(decision: Decision, text: str, variant: str = "") -> tuple[Answer, str | None]:
        """Apply the format-failure policy: a bad message is a flagged silence, a bad choice a flagged fallback.
        Async chat messages are plain text (the reference's shape), other variants' messages are quoted."""
        if decision.action == "schedule":
            choice, error = parse_schedule(text)
            return Answer(target=choice, format_failure=error is not None), error
        if decision.action == "speak" and variant == "async":
            chat, error = parse_chat_message(text, decision.player)
            if error:
                return Answer(text=None, format_failure=True), error
            return Answer(text=chat), None
        if decision.action == "speak":
            message, error = parse_message(text)
            if error:
                return Answer(text=None, format_failure=True), error
            return Answer(text=message if message else None), None
        if decision.mode == "belief":
            dist, reasoning, error = parse_belief(text, decision.choices)
            suspicion = parse_mafia_probability(text, decision.choices) if decision.action == "vote" else None
            return Answer(belief=dist, reasoning=reasoning, format_failure=error is not None,
                          mafia_probability=suspicion), error
        name, error = parse_name(text, decision.choices)
        return Answer(target=name, format_failure=error is not None), error

    # -- prompts ---------------------------------------------------------------------------------------------------
    def build_prompt(
        self, decision: Decision, view: PlayerView, request: str | None = None, intro: str | None = None
    ) -> tuple[str, int]:
        """(prompt, length of the part shared with this player's earlier prompts). `request` replaces the decision's
        own request after the memory (a statement label's questions), `intro` the opening where it depends on the
        action (a `role_action` layout)."""
        if self.prompts.style == "reference":
            return self._reference(decision, view, request)
        if view.variant == "async":
            base, suffix = self._async(decision, view)
            memory = chat_lines(view, self.prompts)
        elif view.variant == "mini-mafia":
            base, suffix = self._mini_mafia(decision, view)
            memory = memory_lines(view, self.prompts)
        else:
            base, suffix = self._classic(decision, view, intro)
            memory = self._classic_memory(view)
        if request is not None:
            suffix = request
        head = base.rstrip("\n") + "\n"
        return head + "\n".join(memory) + "\n\n" + suffix.strip("\n") + "\n", len(head)

    def _others(self, view: PlayerView) -> list[str]:
        """The other players' names: seat order, or (as the reference) a fresh order at every call, seeded by the
        game, the player and the call number so that a replay renders the same prompts."""
        others = [p for p in view.players if p != view.name]
        if self.prompts.options.get("others_order") == "shuffled":
            random.Random(f"{self.game_id}\x1f{view.name}\x1f{self._n}").shuffle(others)
        return others

    def _reference(self, decision: Decision, view: PlayerView, request: str | None = None) -> tuple[str, int]:
        """The reference's own templates (from a batch_config.json), filled as its code fills them."""
        rules: Any = view.rules
        t = self.prompts.templates
        if request is not None:
            suffix = request
        elif decision.action == "speak":
            suffix = t["discussion_suffix"].format(
                round_num=decision.step,
                discussion_rounds=decision.steps,
                message_limit=rules.message_limit,
                name=view.name,
            )
        elif decision.action == "vote":
            suffix = t["voting_suffix"].format(candidates=", ".join(decision.choices))
        else:
            suffix = t["night_action_suffix"].format(
                round_num=decision.round, action=decision.action, candidates=", ".join(decision.choices)
            )
        memory = "\n".join(memory_lines(view, self.prompts)) or self.prompts.memory["no_events"]
        values = {
            "name": view.name,
            "role": view.role,
            "other_players": ", ".join(self._others(view)),
            "composition": composition_text(rules.composition, self.prompts, "reference"),
        }
        marker = "\x00memory\x00"
        try:
            shaped = t["base_prompt"].format(**values, memory=marker, action_specific_content=suffix)
        except (KeyError, IndexError, ValueError) as exc:
            raise UserError(f"batch_config base_prompt: cannot fill placeholder {exc}") from None
        prefix = shaped.index(marker)
        return shaped.replace(marker, memory), prefix

    def _mini_mafia(self, decision: Decision, view: PlayerView) -> tuple[str, str]:
        rules: Any = view.rules
        t = self.prompts.templates
        values: dict[str, object] = {
            "message_limit": rules.message_limit,
            "composition_text": composition_text(
                rules.composition, self.prompts, self.prompts.options.get("composition_order", "ours")
            ),
            "name": view.name,
            "role": view.role,
            "others": ", ".join(self._others(view))
            if self.prompts.options.get("others_order") == "shuffled"
            else join_names(self._others(view), self.prompts),
        }
        base = render(t["base"], **values)
        key = {"speak": "discussion", "vote": "vote", "kill": "kill", "investigate": "investigate"}[decision.action]
        return base, render(t[key], **decision_values(decision))

    def _async(self, decision: Decision, view: PlayerView) -> tuple[str, str]:
        rules: Any = view.rules
        t = self.prompts.templates
        f = self.prompts.fragments
        mates = [e.data.get("teammates") or [] for e in view.events if e.type == "role_assigned"]
        if view.team == "mafia":
            others = [m for ms in mates for m in ms]
            together = render(f["together"], names=join_names(others, self.prompts)) if others else ""
            role_text = render(f["role_mafia"], together=together)
        else:
            role_text = f["role_bystander"]
        base = render(
            t["base"],
            name=view.name,
            n_players=rules.n_players,
            composition_text=composition_text(rules.composition, self.prompts),
            day_length=duration_text(rules.day_seconds, self.prompts),
            night_length=duration_text(rules.night_seconds, self.prompts),
            role_text=role_text,
            players=render(f["players"], names=join_names(list(view.players), self.prompts)),
        )
        clock = decision.clock or "00:00:00"
        chat = f["chat_day"] if decision.phase == "day" else f["chat_night"]
        key = {"schedule": "schedule", "speak": "generate", "vote": "vote", "kill": "kill"}[decision.action]
        return base, render(t[key], clock=clock, chat=chat, name=view.name, **decision_values(decision))

    def _classic(self, decision: Decision, view: PlayerView, intro: str | None = None) -> tuple[str, str]:
        if self.prompts.options.get("layout") == "role_action":
            return self._classic_role_action(decision, view, intro)
        rules: Any = view.rules
        t = self.prompts.templates
        f = self.prompts.fragments
        role_key = f"role_{view.role}"
        role_text = f[role_key] if role_key in f else render(f["role_other"], role=view.role)
        belief = rules.decision == "belief"
        base = render(
            t["base"],
            name=view.name,
            n_players=rules.n_players,
            composition_text=composition_text(rules.composition, self.prompts),
            detective_text=f["detective"] if rules.detective else "",
            day_text=f["day_speaking"] if rules.speaking and rules.speaking_rounds else "",
            reveal_text=f["reveal"] if rules.reveal_role else f["hidden"],
            rules_text=render(f["max_days"], max_days=rules.max_days),
            role_text=role_text,
            message_limit=rules.message_limit,
            decision_text=f["decision_belief"] if belief else f["decision_name"],
        )
        alive = view.active_players()
        gone = [p for p in view.players if p not in alive]
        answer_text = f["answer_belief"] if belief else f["answer_name"]
        return base, render(
            t[decision.action],
            active=join_names(alive, self.prompts),
            gone=join_names(gone, self.prompts) or f["nobody"],
            answer_text=answer_text,
            **decision_values(decision),
        )

    def _classic_role_action(self, decision: Decision, view: PlayerView, opening: str | None = None) -> tuple[str, str]:
        """Strategema's layout (appendix A.1): an opening for this role and action, the context, then the request
        with the role's strategy advice. A town role without its own wording reads the villager's."""
        rules: Any = view.rules
        t = self.prompts.templates
        f = self.prompts.fragments
        action = decision.action

        def piece(kind: str) -> str:
            for role in (view.role, "villager" if view.team == "town" else view.role):
                if f"{kind}_{role}" in f:
                    return f[f"{kind}_{role}"]
            raise UserError(f"prompt {self.prompts.ident} has no {kind}_{view.role} (nor a villager's) for {action}")

        if action == "speak":
            intro = render(f["intro_speak"], name=view.name, role=view.role, speak_instruction=piece("speak"))
            ask = render(f["ask_speak"], message_limit=rules.message_limit)
        else:
            intro = piece(f"intro_{action}")
            ask = render(piece(f"ask_{action}"), choices=", ".join(decision.choices))
        base = render(
            t["base"],
            intro=intro if opening is None else render(opening, name=view.name, role=view.role),
            n_players=rules.n_players,
            composition_text=composition_text(rules.composition, self.prompts),
            reveal_text=f["reveal"] if rules.reveal_role else f["hidden"],
            # the context's heading for the rules' memory, in versions that word it by memory (classic/v4)
            context_text=f.get(f"context_text_{rules.memory}", f.get("context_text", "")),
        )
        if decision.mode != "belief":
            answer = f["answer_name"]
        else:
            answer = f["answer_suspicion"] if self._asks_suspicion(decision, view) else f["answer"]
        alive = view.active_players()
        gone = [p for p in view.players if p not in alive]
        return base, render(
            t[action],
            active=join_names(alive, self.prompts),
            gone=join_names(gone, self.prompts) or f["nobody"],
            ask_text=ask,
            answer_text=answer,
            **decision_values(decision),
        )

    def _classic_memory(self, view: PlayerView) -> list[str]:
        rules: Any = view.rules
        if rules.memory == "current_phase":
            starts = [e.seq for e in view.events if e.type == "phase_start"]
            return memory_lines(view, self.prompts, since_seq=starts[-1] if starts else 0)
        if rules.memory == "last_k":
            return memory_lines(view, self.prompts, reasoning_keep=rules.memory_k)
        return memory_lines(view, self.prompts)


def _player_id(name: str) -> str:
    """A player's integer id, the number its name ends with ("Player 3" is "3"); the name itself without one."""
    digits = name.rstrip()[len(name.rstrip().rstrip("0123456789")):]
    return digits or name


def _common_prefix(a: str, b: str) -> int:
    """Characters shared at the start (what a provider's prefix cache can reuse). Binary search over slice
    comparisons: they run in C, so a 10 kB prompt costs microseconds, not a Python loop per character."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def prompt_provenance(prompts: PromptSet) -> dict[str, Any]:
    """What a record says about its prompt (see `PromptSet.provenance`)."""
    return prompts.provenance()

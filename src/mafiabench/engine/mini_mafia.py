"""Mini-Mafia (the benchmark protocol "v4.1"): four players, one night, one day.

Night 1 is scripted by default (a uniformly random villager dies, the detective learns the mafioso); with
`night = "agents"` the mafioso picks the victim and the detective then investigates a player still active.
Day 1: `discussion_rounds` rounds, each a fresh shuffled speaking order; then a simultaneous vote; plurality is
arrested with a uniform tie-break. Town wins iff the mafioso is arrested.

The defaults are the reference protocol (bastoscostadavi/llm-mafia-game): its prompt states a 200-character limit
but its code cuts nothing (`message_limit` is what players are told, `cut_messages` what the engine does), and it
lists candidates in the order of its name list, Alice to Diana (`candidate_order`). Other studies choose otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mafiabench.engine.core import Decision, GameEngine, Script
from mafiabench.engine.events import player_visibility

DEFAULT_NAMES = ("Alice", "Bob", "Charlie", "Diana")


class MiniMafiaRules(BaseModel):
    """Rules of one Mini-Mafia game. Every field is recorded with the game."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    discussion_rounds: int = Field(2, ge=0, le=50, description="Day-1 discussion rounds; 0 = no communication.")
    message_limit: int = Field(
        200, ge=1, description="Characters per message the prompt asks for (what players are told)."
    )
    cut_messages: bool = Field(
        False,
        description="Cut a longer message at message_limit (flagged truncated). The reference asks for the limit in "
        "its prompt and cuts nothing: false.",
    )
    candidate_order: Literal["alphabetical", "seat"] = Field(
        "alphabetical",
        description="Order of the names a vote or night action is chosen from: alphabetical (the reference's, whose "
        "players are listed Alice to Diana) or seat order (seats are shuffled per game).",
    )
    night: Literal["scripted", "agents"] = Field("scripted", description="Who plays night 1.")
    mafioso_knows_detective: bool = Field(
        False, description="Tell the mafioso who the detective is and that it knows (older protocol)."
    )
    names: tuple[str, str, str, str] = Field(DEFAULT_NAMES, description="The four player names, shuffled into seats.")

    @field_validator("names")
    @classmethod
    def _distinct(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(v)) != len(v) or any(not n.strip() for n in v):
            raise ValueError(f"names must be four distinct non-empty names, got {list(v)}")
        return v

    @property
    def composition(self) -> dict[str, int]:
        return {"detective": 1, "mafioso": 1, "villager": 2}


class MiniMafia(GameEngine):
    variant = "mini-mafia"
    rules: MiniMafiaRules

    def candidates(self, names: Iterable[str]) -> tuple[str, ...]:
        """Names to choose from (seat order as given), sorted when the rules say `alphabetical`."""
        ordered = tuple(names)
        return tuple(sorted(ordered)) if self.rules.candidate_order == "alphabetical" else ordered

    def script(self) -> Script:
        rules = self.rules
        self.seat_players(rules.names, ["mafioso", "detective", "villager", "villager"])
        self.log_setup(rules.composition)
        mafioso = self.active(role="mafioso")[0]
        detective = self.active(role="detective")[0]

        # Night 1
        self.emit("night", 1, "phase_start", text="Night 1 begins.")
        if rules.night == "scripted":
            victim = self.rng.choice(self.active(role="villager"))
            self.kill(mafioso.name, victim.name, 1)
            self.investigate(detective.name, mafioso.name, 1, scripted=True)
        else:
            kill_choices = self.candidates(p.name for p in self.active() if p.team != "mafia")
            answers = yield [Decision(mafioso.name, "kill", "night", 1, kill_choices)]
            victim_name, failed, fallback = self.resolve_choice(
                Decision(mafioso.name, "kill", "night", 1, kill_choices), answers[mafioso.name], "night", 1
            )
            self.kill(mafioso.name, victim_name, 1, format_failure=failed, random_fallback=fallback)
            if detective.active:
                choices = self.candidates(p.name for p in self.active() if p.name != detective.name)
                decision = Decision(detective.name, "investigate", "night", 1, choices)
                answers = yield [decision]
                target, failed, fallback = self.resolve_choice(decision, answers[detective.name], "night", 1)
                self.investigate(detective.name, target, 1, format_failure=failed, random_fallback=fallback)
        if rules.mafioso_knows_detective and detective.active:
            self.emit(
                "night",
                1,
                "info",
                target=detective.name,
                visibility=player_visibility(mafioso.name),
                text=f"{detective.name} is the detective and knows that you are the mafioso.",
                data={"kind": "detective_known", "detective": detective.name},
            )

        # Day 1
        self.emit("day", 1, "phase_start", text="Day 1 begins.")
        self.outcome.days = 1
        for r in range(1, rules.discussion_rounds + 1):
            order = [p.name for p in self.active()]
            self.rng.shuffle(order)
            for speaker in order:
                answers = yield [Decision(speaker, "speak", "day", 1, (), step=r, steps=rules.discussion_rounds)]
                self.apply_message(
                    speaker, answers[speaker], 1, rules.message_limit if rules.cut_messages else None,
                    discussion_round=r,
                )

        voters = [p.name for p in self.active()]
        decisions = [Decision(v, "vote", "day", 1, self.candidates(n for n in voters if n != v)) for v in voters]
        answers = yield decisions
        votes = self.apply_votes(decisions, answers, "day", 1)
        arrested, tie, counts = self.tally(votes)
        self.outcome.tie_decided = tie
        self.player(arrested).active = False
        self.emit(
            "day",
            1,
            "elimination",
            target=arrested,
            tie_break=tie,
            text=f"{arrested} was arrested",
            data={"votes": counts, "role": self.player(arrested).role, "role_revealed": False},
        )
        winner = "town" if self.player(arrested).role == "mafioso" else "mafia"
        self.finish(winner, "mafioso arrested" if winner == "town" else "innocent arrested", phase="end", rnd=1)

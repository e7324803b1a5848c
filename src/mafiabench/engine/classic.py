"""Classic multi-night Mafia (the "Strategema" protocol): N players, M mafiosos, optional detective.

Night: every active mafioso proposes a victim (visible to the mafia only); one randomly chosen mafioso's proposal
decides (`night_decider = "random_mafioso"`) or the proposals are a plurality vote (`"mafia_vote"`). The detective,
if any, investigates at the same time. Day: `speaking_rounds` rounds of one statement per active player in a
shuffled order (none if `speaking = false`), then a simultaneous vote. Repeats until a team wins; after `max_days`
days a game ends `unfinished` (counted and flagged, never dropped).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mafiabench.engine.core import Decision, GameEngine, Script
from mafiabench.engine.events import MAFIA_TEAM

# Who reads a mafioso's night proposal: the whole mafia team (the protocol card names it; the Strategema paper does
# not say the mafiosos see each other's proposals).
PROPOSALS_SEEN_BY = MAFIA_TEAM


class ClassicRules(BaseModel):
    """Rules of one classic game. Memory and decision options shape prompts and sampling; all are recorded."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_players: int = Field(6, ge=3, le=40, description="Number of players.")
    n_mafia: int = Field(2, ge=1, description="Number of mafiosos.")
    detective: bool = Field(False, description="Include one detective among the town.")
    night_decider: Literal["random_mafioso", "mafia_vote"] = Field(
        "random_mafioso", description="How the mafia's proposals become the kill."
    )
    speaking: bool = Field(True, description="Whether the day has a speaking phase (ablation: false).")
    speaking_rounds: int = Field(1, ge=0, le=20, description="Statements per player per day.")
    message_limit: int = Field(400, ge=1, description="Characters per statement; longer ones are truncated.")
    reveal_role: bool = Field(True, description="Reveal an eliminated player's role.")
    max_days: int = Field(10, ge=1, description="Days before a stuck game ends as unfinished.")
    decision: Literal["name", "belief"] = Field(
        "belief", description="Agents answer a distribution (the reference) or a name."
    )
    sampling: Literal["sample", "argmax"] = Field("sample", description="How a belief becomes an action.")
    memory: Literal["full", "last_k", "current_phase"] = Field(
        "last_k",
        description="What an agent remembers: the public record plus its last `memory_k` reasoning entries "
        "(last_k, the reference), all of them (full), or the current phase only (current_phase, the ablation).",
    )
    memory_k: int = Field(3, ge=1, description="Reasoning entries kept with memory = last_k (the reference: 3).")
    names: tuple[str, ...] | None = Field(None, description="Player names; default Player 1..N.")

    @model_validator(mode="after")
    def _check(self) -> ClassicRules:
        town = self.n_players - self.n_mafia
        if self.n_mafia >= town:
            raise ValueError(f"n_mafia={self.n_mafia} must be fewer than the town ({town}) or mafia win at once")
        if self.names is not None and (
            len(self.names) != self.n_players or len(set(self.names)) != len(self.names)
        ):
            raise ValueError(f"names must be {self.n_players} distinct names, got {list(self.names)}")
        return self

    @property
    def player_names(self) -> tuple[str, ...]:
        return self.names or tuple(f"Player {i}" for i in range(1, self.n_players + 1))

    @property
    def composition(self) -> dict[str, int]:
        det = 1 if self.detective else 0
        comp = {"mafioso": self.n_mafia, "villager": self.n_players - self.n_mafia - det}
        if det:
            comp["detective"] = 1
        return comp


class Classic(GameEngine):
    variant = "classic"
    rules: ClassicRules

    def script(self) -> Script:
        rules = self.rules
        roles = [role for role, n in sorted(rules.composition.items()) for _ in range(n)]
        self.seat_players(rules.player_names, roles)
        self.log_setup(rules.composition)
        mode = rules.decision

        for day in range(1, rules.max_days + 1):
            # Night `day`: the mafia propose and the detective investigates, simultaneously.
            self.emit("night", day, "phase_start", text=f"Night {day} begins.")
            mafia = [p.name for p in self.active(team="mafia")]
            town_choices = tuple(p.name for p in self.active(team="town"))
            batch = [Decision(m, "kill", "night", day, town_choices, mode=mode) for m in mafia]
            detectives = [p.name for p in self.active(role="detective")]
            for d in detectives:
                choices = tuple(p.name for p in self.active() if p.name != d)
                batch.append(Decision(d, "investigate", "night", day, choices, mode=mode))
            answers = yield batch
            proposals: dict[str, str] = {}
            for dec in batch[: len(mafia)]:
                target, failed, fallback = self.resolve_choice(dec, answers[dec.player], "night", day)
                proposals[dec.player] = target
                self.emit(
                    "night",
                    day,
                    "vote",
                    actor=dec.player,
                    target=target,
                    visibility=PROPOSALS_SEEN_BY,
                    format_failure=failed,
                    random_fallback=fallback,
                    data={"kind": "night_proposal"},
                )
            for dec in batch[len(mafia) :]:
                target, failed, fallback = self.resolve_choice(dec, answers[dec.player], "night", day)
                self.investigate(dec.player, target, day, format_failure=failed, random_fallback=fallback)
            if rules.night_decider == "random_mafioso":
                decider = self.rng.choice(mafia)
                victim, tie = proposals[decider], False
            else:
                decider = None
                victim, tie, _ = self.tally(proposals)
            self.kill(decider or "mafia", victim, day, tie_break=tie)
            if rules.reveal_role:
                self.log[-1].data["role"] = self.player(victim).role
            if (winner := self.parity_winner()) is not None:
                self.outcome.days = day - 1
                self.finish(winner, "parity after night kill", phase="end", rnd=day)
                return

            # Day `day`
            self.outcome.days = day
            self.emit("day", day, "phase_start", text=f"Day {day} begins.")
            rounds = rules.speaking_rounds if rules.speaking else 0
            for r in range(1, rounds + 1):
                order = [p.name for p in self.active()]
                self.rng.shuffle(order)
                for speaker in order:
                    answers = yield [Decision(speaker, "speak", "day", day, (), step=r, steps=rounds)]
                    self.apply_message(speaker, answers[speaker], day, rules.message_limit, discussion_round=r)
            voters = [p.name for p in self.active()]
            decisions = [
                Decision(v, "vote", "day", day, tuple(n for n in voters if n != v), mode=mode) for v in voters
            ]
            answers = yield decisions
            votes = self.apply_votes(decisions, answers, "day", day)
            out, tie, counts = self.tally(votes)
            self.player(out).active = False
            role = self.player(out).role
            self.emit(
                "day",
                day,
                "elimination",
                target=out,
                tie_break=tie,
                text=f"{out} was eliminated" + (f"; they were {role}." if rules.reveal_role else "."),
                data={"votes": counts, "role": role, "role_revealed": rules.reveal_role},
            )
            if (winner := self.parity_winner()) is not None:
                self.outcome.tie_decided = tie
                reason = "no mafia left" if winner == "town" else "mafia reached parity"
                self.finish(winner, reason, phase="end", rnd=day)
                return
        self.finish(
            None, f"no winner after {rules.max_days} days", phase="end", rnd=rules.max_days, status="unfinished"
        )

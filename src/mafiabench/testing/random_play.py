"""Games played by the real engine with random answers: fixtures, benchmarks and round-trip tests all need them.

Every answer comes from the caller's `random.Random`, so a seed gives the same game. `failure_rate` turns that share
of answers into format failures (the engine then logs a flagged silence or a flagged random vote); `say` writes a
discussion message (default: silence).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from mafiabench.engine import Answer, Decision, GameEngine

Say = Callable[[random.Random, Decision, GameEngine], str | None]


def random_answer(
    decision: Decision, game: GameEngine, rng: random.Random, *, failure_rate: float = 0.0, say: Say | None = None
) -> Answer:
    failed = rng.random() < failure_rate
    if decision.action == "speak":
        return Answer(format_failure=True) if failed else Answer(text=say(rng, decision, game) if say else None)
    if decision.mode == "belief":
        if failed:
            return Answer(belief={})
        # P(mafia) per player (Strategema's belief state) at day votes, from its own generator: the caller's draws,
        # and so every game played before it was recorded, stay as they were.
        suspicion = None
        if decision.action == "vote":
            own = random.Random(f"{game.seed}:{decision.player}:{decision.round}")
            suspicion = {c: own.random() for c in decision.choices}
        return Answer(belief={c: rng.random() for c in decision.choices}, mafia_probability=suspicion)
    return Answer(format_failure=True) if failed else Answer(target=rng.choice(decision.choices))


def play_random(
    game: GameEngine, rng: random.Random, *, failure_rate: float = 0.0, say: Say | None = None
) -> GameEngine:
    """Reset `game` and play it to the end with random answers; returns it for `record_from_engine`."""
    game.reset()
    while not game.done:
        game.step(
            {d.player: random_answer(d, game, rng, failure_rate=failure_rate, say=say) for d in game.pending()}
        )
    return game

"""The Hidden in Plain Text protocol card: the shipped experiment (experiments/hidden_in_plain_text.toml) departs from
the paper's protocol (src/mafiabench/protocols/hidden-in-plain-text.toml) where the card says (issue 35: the inferred
human set, the virtual clock LLMafia's scheduling is replayed on, caps the paper does not state, six things async/v2
says that the paper's prompts do not), and each departure injected into its file is reported, alone; the tick
scheduling departs three times more (when a player is asked, typing at night, how the votes are taken)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from mafiabench.protocols import render_text
from mafiabench.study.protocol import protocol_card
from mafiabench.study.spec import Experiment, load_experiment, parse_experiment

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = ROOT / "experiments" / "hidden_in_plain_text.toml"


def edited(edit: Any) -> Experiment:
    data = tomllib.loads(EXPERIMENT.read_text(encoding="utf-8"))
    edit(data)
    # the pinned list is relative to the experiment's folder
    if isinstance(data.get("detector", {}).get("imported_games"), str):
        data["detector"]["imported_games"] = str(EXPERIMENT.parent / data["detector"]["imported_games"])
    return parse_experiment(data, f"{EXPERIMENT} (edited)")


KEPT = {"detector.human_set", "timing.clock", "caps.message_tokens", "caps.message_chars", "added.composition",
        "added.post_any_time", "added.typing_cue", "added.clock", "added.message_format", "added.vote_advice"}


def test_the_shipped_experiment_departs_from_the_paper_where_the_card_says() -> None:
    c = protocol_card(load_experiment(EXPERIMENT))
    assert c is not None and c.protocol.name == "hidden-in-plain-text"
    assert {r.key for r in c.deviations} == KEPT
    assert len(c.matches) == 27 and len(c.notes) >= 3
    assert f"{len(KEPT)} deviation(s)" in render_text(c)
    human = next(r for r in c.rows if r.key == "detector.human_set")
    assert str(human.experiment_value).startswith("25 valid by the importer's rules + 3 inferred (")


def _set(section: str | None, key: str, value: Any) -> Any:
    def edit(data: dict[str, Any]) -> None:
        (data.setdefault(section, {}) if section else data)[key] = value
    return edit


def _drop(section: str, key: str) -> Any:
    def edit(data: dict[str, Any]) -> None:
        data[section].pop(key)
    return edit


@pytest.mark.parametrize(("edit", "deviation"), [
    (_set(None, "prompt_version", "v1"), "prompt.words"),  # LLMafia's nudge and "one short sentence": no word map
    (_set("rules", "draw_names", False), "rules.draw_names"),
    (_set("rules", "day_seconds", 120), "rules.day_seconds"),
    (_set("models", "default", {"temperature": 1.0, "max_tokens_message": 400}), "model.gpt-4o.temperature"),
    (_set(None, "cells", [{"name": "mini", "agents": {"default": "openai/gpt-4.1-mini"}}]), "players.models"),
    (_set(None, "games_per_cell", 10), "design.games"),
    (_set("detector", "models", ["openai/gpt-4.1"]), "detector.models"),
    (_set("detector", "temperature", 0.7), "detector.temperature"),
    (_set("detector", "prompt_version", "v1"), "detector.prompt"),
    (_drop("detector", "imported_games"), "detector.human_games"),
    (_set("rules", "typing", False), "timing.typing"),
])
def test_each_departure_from_the_paper_is_reported_alone(edit: Any, deviation: str) -> None:
    c = protocol_card(edited(edit))
    assert c is not None
    assert [r.key for r in c.deviations if r.key not in KEPT] == [deviation]


def test_the_tick_scheduling_departs_from_llmafias_three_times_more() -> None:
    """The same study on 5-second ticks (the engine's default scheduling): every player not typing asked each tick,
    typing halved at night, votes taken one at a time in a seeded order; with votes shown only when all have voted,
    the rules' votes-as-cast aspect departs too."""
    def ticks(votes_as_cast: bool) -> Any:
        def edit(data: dict[str, Any]) -> None:
            rules = data["rules"]
            rules.update(scheduling="ticks", tick_seconds=5, votes_as_cast=votes_as_cast)
            rules.pop("call_seconds")
        return edit

    on = protocol_card(load_experiment(EXPERIMENT))
    off = protocol_card(edited(ticks(True)))
    assert on is not None and off is not None and len(off.rows) == len(on.rows) == 37 + len(on.notes)
    assert {r.key for r in off.deviations} - KEPT == {"timing.scheduler", "timing.typing", "timing.votes"}
    assert len(off.deviations) == len(on.deviations) + 3 == 13
    clock = next(r for r in off.rows if r.key == "timing.clock")
    assert clock.experiment_value == "virtual, in 5 s ticks: a call takes no time" and clock.matches is False
    simultaneous = protocol_card(edited(ticks(False)))
    assert simultaneous is not None
    assert {r.key for r in simultaneous.deviations} - {r.key for r in off.deviations} == {"rules.votes_as_cast"}

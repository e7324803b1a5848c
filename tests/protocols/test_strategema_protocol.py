"""The Strategema protocol card: experiments/strategema.toml departs from the paper's protocol
(src/mafiabench/protocols/strategema.toml) only where it says so, and every deviation injected into its own file is
reported; the structured-output request the GPT-4.1 seats send."""

from __future__ import annotations

import asyncio
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from mafiabench.agents.llm import LLMAgent, ModelSettings
from mafiabench.agents.prompts import load_prompts
from mafiabench.backends.backend import Completion, GenerateSettings, Message
from mafiabench.backends.endpoints import BUILTIN_ENDPOINTS
from mafiabench.backends.openai_backend import OpenAIBackend
from mafiabench.engine.classic import ClassicRules
from mafiabench.engine.core import Decision
from mafiabench.protocols import render_text
from mafiabench.study.protocol import experiment_facts, protocol_card
from mafiabench.study.spec import Experiment, load_experiment, parse_experiment

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "experiments" / "strategema.toml"
# The deviations the study keeps: the no-speaking condition on every configuration, which measures Table 2's
# "without speaking" column (the paper took it from outside benchmarks); rules, caps and who-sees-what the paper does
# not state; what classic/v4 says that the appendix does not.
KEPT = {"design.no_speaking", "rules.night", "rules.reveal_role", "rules.max_days", "visibility.night_proposals",
        "caps.statement_chars", "caps.statement_tokens", "caps.belief_tokens",
        "added.composition", "added.json_only", "added.quoted_statement", "added.reveal"}


def edited(edit: Any) -> Experiment:
    data = tomllib.loads(STUDY.read_text(encoding="utf-8"))
    edit(data)
    return parse_experiment(data, f"{STUDY} (edited)")


def test_the_study_matches_the_paper_but_for_table_2s_measured_column() -> None:
    c = protocol_card(load_experiment(STUDY))
    assert c is not None
    assert {r.key for r in c.deviations} == KEPT
    assert len(c.matches) >= 20
    facts = experiment_facts(load_experiment(STUDY))["strategema"]
    assert facts["main_model"] == "gpt-4.1" and facts["cross_check_models"] == ["claude-3-sonnet-20240229"]
    assert facts["baseline"] == {"configurations": ["6x2", "8x2", "10x3", "12x3"], "games": 100}
    assert facts["cross_check"] == {"configurations": ["6x2", "12x3"], "games": 25}
    assert f"{len(KEPT)} deviation(s)" in render_text(c)


def _model(new: str) -> Any:
    def edit(data: dict[str, Any]) -> None:
        for cell in data["cells"]:
            if cell["agents"]["default"] == "openai/gpt-4.1":
                cell["agents"]["default"] = new
    return edit


def _drop_cell(name: str) -> Any:
    def edit(data: dict[str, Any]) -> None:
        data["cells"] = [c for c in data["cells"] if c["name"] != name]
    return edit


def _set(*path: str, value: Any) -> Any:
    def edit(data: dict[str, Any]) -> None:
        node = data
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return edit


@pytest.mark.parametrize(
    ("edit", "deviation"),
    [
        (_model("openai/gpt-4.1-mini"), "models.main"),  # what the study played before issue 26
        (_set("prompt_version", value="v2"), "prompt.words"),  # the condensed prompt: no word map
        (_set("prompt_version", value="v4-belief"), "added.belief_state"),  # the P(mafia) extension: counted
        (_set("prompt_version", value="v3"), "design.limited_memory_prompt"),  # v3 tells it the whole record
        (_set("models", "openai/gpt-4.1", "response_format", value="text"), "models.structured_output"),
        (_set("models", "openai/gpt-4.1", "temperature", value=1.0), "models.temperature.main"),
        (_set("rules", "memory_k", value=5), "rules.memory_k"),
        (_set("rules", "sampling", value="argmax"), "rules.sampling"),
        (_set("games_per_cell", value=50), "design.games"),
        (_drop_cell("n10-m3"), "design.configurations"),
        (_drop_cell("n8-m2-limited-memory"), "design.limited_memory"),
        (_drop_cell("n12-m3-cross-check"), "design.cross_check_configurations"),
    ],
)
def test_an_injected_deviation_is_reported(edit: Any, deviation: str) -> None:
    c = protocol_card(edited(edit))
    assert c is not None
    assert deviation in {r.key for r in c.deviations}


class Recording:
    """A backend that records the settings each call was sent with and answers a fixed JSON belief."""

    provider, model = "recording", "m"

    def __init__(self) -> None:
        self.sent: list[GenerateSettings] = []

    async def generate(self, messages: list[Message], settings: GenerateSettings) -> Completion:
        self.sent.append(settings)
        return Completion(text='{"reasoning": "r", "probability": {"2": 1}, "mafia_probability": {"2": 0.9}}')


def _vote(team: str, response_format: str) -> tuple[GenerateSettings, Any]:
    from mafiabench.agents.agent import PlayerView

    backend = Recording()
    agent = LLMAgent("recording/m", backend, load_prompts("classic", "v3"),  # type: ignore[arg-type]
                     ModelSettings(response_format=response_format))  # type: ignore[arg-type]
    view = PlayerView("Player 1", "villager" if team == "town" else "mafioso", team, "classic",
                      ClassicRules(n_players=6, n_mafia=2), tuple(f"Player {i}" for i in range(1, 7)), ())
    decision = Decision("Player 1", "vote", "day", 1, ("Player 2", "Player 3"), mode="belief")
    turn = asyncio.run(agent.act(decision, view))
    return backend.sent[0], turn.answer


def test_a_villager_s_vote_asks_a_strict_schema_of_ids_with_p_mafia() -> None:
    settings, answer = _vote("town", "json_schema")
    fmt = settings.response_format
    assert fmt is not None and fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == ["reasoning", "probability", "mafia_probability"]
    assert schema["properties"]["probability"]["required"] == ["2", "3"]  # integer ids, every one required
    assert answer.belief == {"Player 2": 1.0, "Player 3": 0.0} and answer.mafia_probability == {"Player 2": 0.9}
    body = OpenAIBackend("gpt-4.1", BUILTIN_ENDPOINTS["openai"]).request_kwargs([Message("user", "x")], settings)
    assert body["response_format"] == fmt
    assert json.loads(json.dumps(settings.to_dict()))["response_format"] == fmt  # recorded with the call


def test_a_mafioso_s_vote_is_not_asked_p_mafia_and_text_asks_nothing() -> None:
    settings, _ = _vote("mafia", "json_schema")
    assert settings.response_format is not None
    assert list(settings.response_format["json_schema"]["schema"]["properties"]) == ["reasoning", "probability"]
    assert _vote("town", "json_object")[0].response_format == {"type": "json_object"}
    plain, _ = _vote("town", "text")
    assert plain.response_format is None and "response_format" not in plain.to_dict()

"""The protocol card: every place an experiment departs from the reference protocol it names is reported, and nothing
else. Built on the shipped flagship experiment (experiments/mini_mafia_backgrounds.toml) and the shipped protocol
(src/mafiabench/protocols/mini-mafia-v4.1.toml); each deviation is injected into the experiment's own file."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from mafiabench.errors import UserError
from mafiabench.protocols import ABSENT, available, card, load_protocol, lookup, render_text
from mafiabench.study.protocol import experiment_facts, protocol_card
from mafiabench.study.spec import Experiment, load_experiment, parse_experiment

ROOT = Path(__file__).resolve().parents[2]
FLAGSHIP = ROOT / "experiments" / "mini_mafia_backgrounds.toml"
# The one deviation the flagship keeps: v4.1-full sends no [INST] wrapper (docs/prompt-information.md says why).
# The prompt wrapper, and the latent mart's interval widened where the games scatter beyond the model (the study
# shows the posterior sd alone).
FLAGSHIP_DEVIATIONS = {"prompt.wrapper", "statistics.latent_interval"}
# The models the reference called with its standard settings (55/5 tokens, temperature 0.7): `[models.default]` here.
STANDARD = ["deepseek-chat", "gpt-4.1-mini", "claude-opus-4-1-20250805", "claude-sonnet-4-20250514",
            "gemini-2.5-flash-lite", "Mistral-7B-Instruct-v0.2-Q4_K_M.gguf", "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
            "Qwen2.5-7B-Instruct-Q4_K_M.gguf"]


def variant_of(edit: Any) -> Experiment:
    """The flagship experiment with one edit."""
    data = tomllib.loads(FLAGSHIP.read_text(encoding="utf-8"))
    edit(data)
    return parse_experiment(data, f"{FLAGSHIP} (edited)")


def test_the_flagship_matches_the_reference_but_for_the_prompt_wrapper_and_the_widened_interval() -> None:
    c = protocol_card(load_experiment(FLAGSHIP))
    assert c is not None
    assert {r.key for r in c.deviations} == FLAGSHIP_DEVIATIONS
    assert len(c.matches) >= 40  # rules, caps, parser, order, reasoning, models: each compared, each equal
    text = render_text(c)
    assert "2 deviation(s)" in text and "Prompt wrapper (in the prompt" in text
    assert "Top-down latent model: the uncertainty shown" in text and "widened by sqrt(chi-square / df)" in text
    assert f"in {len(c.matches)} of {len(c.matches) + 2}" in text


def _set(*path: str, value: Any) -> Any:
    def edit(data: dict[str, Any]) -> None:
        node = data
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return edit


def _swap_target(old: str, new: str) -> Any:
    def edit(data: dict[str, Any]) -> None:
        data["design"]["targets"] = [new if t == old else t for t in data["design"]["targets"]]
    return edit


def _drop(*path: str) -> Any:
    def edit(data: dict[str, Any]) -> None:
        node = data
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return edit


@pytest.mark.parametrize(
    ("edit", "aspect"),
    [
        (_set("rules", "cut_messages", value=True), "rules.cut_messages"),
        (_drop("rules", "candidate_order"), None),  # the default is the reference's: no deviation
        (_set("rules", "candidate_order", value="seat"), "rules.candidate_order"),
        (_set("rules", "message_limit", value=150), "rules.message_limit"),
        (_set("rules", "discussion_rounds", value=3), "rules.discussion_rounds"),
        (_set("rules", "night", value="agents"), "rules.night"),
        (_set("rules", "mafioso_knows_detective", value=True), "rules.mafioso_knows_detective"),
        (_set("prompt_version", value="v4.1-condensed"), "prompt.words"),  # other words: no word map for them
        (_set("models", "default", "max_tokens_message", value=50),
         {f"model.{m}.max_tokens_message" for m in STANDARD}),
        (_set("models", "default", "max_tokens_choice", value=10),
         {f"model.{m}.max_tokens_choice" for m in STANDARD}),
        (_set("models", "default", "reprompt_on_failure", value=True), "models.reprompt"),
        (_set("models", "openai/gpt-5-mini", "reasoning_effort", value="low"), "model.gpt-5-mini.reasoning_effort"),
        (_set("models", "openai/gpt-5-mini", "max_tokens_choice", value=4000), "model.gpt-5-mini.max_tokens_choice"),
        (_set("models", "xai/grok-3-mini", "temperature", value=0.7), "model.grok-3-mini.temperature"),
        (_set("models", "xai/grok-3-mini", "reasoning_effort", value="low"), "model.grok-3-mini.reasoning_effort"),
        (_swap_target("google/gemini-2.5-flash-lite", "openrouter/google/gemini-2.5-flash-lite"), "design.targets"),
        (_set("design", "games_per_cell", value=50), "design.games_per_cell"),
    ],
)
def test_every_injected_deviation_is_reported(edit: Any, aspect: str | set[str] | None) -> None:
    c = protocol_card(variant_of(edit))
    assert c is not None
    injected = {aspect} if isinstance(aspect, str) else aspect or set()
    assert {r.key for r in c.deviations} == FLAGSHIP_DEVIATIONS | injected
    text = render_text(c)
    for row in c.deviations:
        assert row.label in text and row.source in text


def test_a_model_the_experiment_does_not_play_is_named_once_not_per_setting() -> None:
    c = protocol_card(variant_of(_swap_target("llamacpp-qwen/Qwen2.5-7B-Instruct-Q4_K_M.gguf",
                                              "openrouter/qwen/qwen-2.5-7b-instruct")))
    assert c is not None
    assert {r.key for r in c.deviations} == FLAGSHIP_DEVIATIONS | {"design.targets"}
    skipped = [r for r in c.notes if r.key.startswith("model.Qwen2.5-7B")]
    assert len(skipped) == 6 and all(r.experiment_value == ABSENT for r in skipped)  # 4 settings, api, wrapper


def test_every_compared_aspect_of_every_protocol_finds_its_value_in_the_facts_of_its_experiment() -> None:
    """A path that names no fact would report a deviation for every experiment: the protocol file is wrong. Each
    shipped protocol is checked against the shipped experiments that name it (there is at least one)."""
    naming: dict[str, list[Path]] = {}
    for path in sorted((ROOT / "experiments").glob("*.toml")):
        ref = tomllib.loads(path.read_text(encoding="utf-8")).get("reference")
        if ref:
            naming.setdefault(ref, []).append(path)
    for name in available():
        assert naming.get(name), f"no shipped experiment names the protocol {name}"
        for path in naming[name]:
            facts = experiment_facts(load_experiment(path))
            for a in load_protocol(name).aspects:
                if a.compare != "note" and not a.absent_skips:
                    assert lookup(facts, a.path) != ABSENT, f"{name} in {path.name}: aspect {a.key} path {list(a.path)}"


def test_an_unknown_reference_is_a_clear_error() -> None:
    with pytest.raises(UserError) as err:
        variant_of(_set("reference", value="mini-mafia-v9"))
    assert "reference" in str(err.value) and "mini-mafia-v9" in str(err.value) and "mini-mafia-v4.1" in str(err.value)


def test_no_reference_no_card() -> None:
    assert protocol_card(variant_of(_drop("reference"))) is None


def test_values_compare_by_kind() -> None:
    p = load_protocol("mini-mafia-v4.1")
    facts = experiment_facts(load_experiment(FLAGSHIP))
    facts["design"]["targets"] = list(reversed(facts["design"]["targets"]))  # a set: order does not matter
    facts["prompt"]["version"] = "mini-mafia/batch-config-v4.1"  # one of the versions with the reference's information
    assert {r.key for r in card(p, "x", facts).deviations} == FLAGSHIP_DEVIATIONS


def test_the_reference_words_from_a_batch_config_match_prompt_information_and_wrapper(tmp_path: Path) -> None:
    """With the user's own v4.1 batch_config.json (shape of the reference's; template text written for the test), the
    prompt rows match, wrapper included: the flagship's prompt deviation is gone (the latent mart's widened interval
    stays: a fact of the marts, not of the prompt)."""
    from support.prompts import TEMPLATES

    path = tmp_path / "batch_config.json"
    path.write_text(json.dumps({"prompt_config": {"version": "v4.1", "message_limit": 200, "templates": TEMPLATES}}),
                    encoding="utf-8")

    def edit(data: dict[str, Any], keep_template: bool = False) -> None:
        del data["prompt_version"]
        data["prompt"] = {"from_batch_config": str(path)}
        for name in ("llamacpp-mistral", "llamacpp-llama", "llamacpp-qwen"):
            if not keep_template:  # the prompt is wrapped already
                del data["endpoints"][name]["options"]["prompt_template"]

    c = protocol_card(variant_of(edit))
    assert c is not None and [r.key for r in c.deviations] == ["statistics.latent_interval"]
    twice = protocol_card(variant_of(lambda data: edit(data, keep_template=True)))  # wrapped by both: a deviation
    assert twice is not None
    assert {r.key for r in twice.deviations} == {f"model.{m}.template" for m in STANDARD[-3:]} | {
        "statistics.latent_interval"}
    assert next(r for r in c.rows if r.key == "information.01").experiment_value == "the reference's own words"


def test_a_run_replaces_its_experiments_card_and_a_run_without_reference_removes_it(tmp_path: Path) -> None:
    """raw_protocol_cards holds each experiment's latest card: recorded again, replaced (not doubled); recorded with
    no rows, gone; another experiment's card untouched."""
    from mafiabench.protocols import rows_for_warehouse
    from mafiabench.warehouse.raw import connect, record_protocol_card

    c = protocol_card(load_experiment(FLAGSHIP))
    assert c is not None
    con = connect(tmp_path / "w.duckdb")
    try:
        record_protocol_card(con, "a", rows_for_warehouse(dataclasses.replace(c, experiment="a")))
        record_protocol_card(con, "b", rows_for_warehouse(dataclasses.replace(c, experiment="b")))
        record_protocol_card(con, "a", rows_for_warehouse(dataclasses.replace(c, experiment="a")))

        def count(e: str) -> int:
            return con.execute("select count(*) from raw_protocol_cards where experiment = ?", [e]).fetchone()[0]

        assert count("a") == count("b") == len(c.rows)
        (deviating,) = con.execute(
            "select list(aspect) from raw_protocol_cards where experiment = 'a' and not matches").fetchone()
        assert sorted(deviating) == ["prompt.wrapper", "statistics.latent_interval"]
        record_protocol_card(con, "a", [])
        assert count("a") == 0 and count("b") == len(c.rows)
    finally:
        con.close()

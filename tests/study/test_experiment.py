"""The experiment file: the shipped examples validate, and every mistake is reported with file, field and value."""

from __future__ import annotations

from pathlib import Path

import pytest

from mafiabench.errors import UserError
from mafiabench.study.spec import Experiment, load_experiment, parse_experiment

ROOT = Path(__file__).resolve().parents[2]


def minimal(**over: object) -> dict[str, object]:
    data: dict[str, object] = {"name": "t", "cells": [{"name": "c", "agents": {"default": "policy/random"}}]}
    data.update(over)
    return data


@pytest.mark.parametrize("name", ["demo.toml", "mini_mafia_backgrounds.toml", "mini_mafia_backgrounds_openrouter.toml"])
def test_shipped_experiments_validate(name: str) -> None:
    exp = load_experiment(ROOT / "experiments" / name)
    assert isinstance(exp, Experiment)
    assert exp.agent_specs()


def test_backgrounds_experiment_is_full_size() -> None:
    exp = load_experiment(ROOT / "experiments" / "mini_mafia_backgrounds.toml")
    assert exp.design is not None
    assert len(exp.design.targets) == 10 and len(exp.design.backgrounds) == 5
    assert exp.games_per_cell == 100


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "exp.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('name = "x"\nvariant = "poker"\n[[cells]]\nname="c"\nagents={default="policy/random"}', ["variant", "poker"]),
        ('name = "x"\ncolour = "red"\n[[cells]]\nname="c"\nagents={default="policy/random"}', ["colour", "red"]),
        ('name = "x"\ngames_per_cell = 0\n[[cells]]\nname="c"\nagents={default="policy/random"}',
         ["games_per_cell", "0"]),
        ('name = "x"\n[rules]\ndiscussion_rounds = -1\n[[cells]]\nname="c"\nagents={default="policy/random"}',
         ["discussion_rounds", "-1"]),
        ('name = "x"\n[[cells]]\nname="c"\nagents={default="nowhere/model"}', ["nowhere", "unknown provider"]),
        ('name = "x"\n[[cells]]\nname="c"\nagents={default="policy/clairvoyant"}', ["clairvoyant"]),
        ('name = "x"\n[[cells]]\nname="c"\nagents={default="no-slash"}', ["no-slash"]),
        ('name = "has space"\n[[cells]]\nname="c"\nagents={default="policy/random"}', ["name", "has space"]),
        ('name = "x"', ["cells", "design"]),
        ('name = "x"\n[design]\ntargets=["fake/a"]\nbackgrounds=["fake/b"]\ncapabilities=["lie"]',
         ["capabilities", "lie"]),
        ('name = "x"\n[[cells]]\nname="c"\nagents={default="fake/a"}\n[models."fake/a"]\nmax_attempts = 0',
         ["max_attempts", "0"]),
        ('name = "x"\n[[cells]]\nname="c"\nagents={default="fake/a"}\n[budget]\nmax_usd = -1', ["max_usd", "-1"]),
        ('name = "x"\n[[cells]]\nname="c"\nagents={default="fake/a"}\n[endpoints.e]\nkind="carrier-pigeon"',
         ["carrier-pigeon"]),
        ('name = "x"\n[[cells]]\nname="c"\nagents={default="policy/random"}\n[[cells]]\nname="c"\n'
         'agents={default="policy/random"}', ["unique", "c"]),
        ('name = "x"\nprompt_version = "v9"\n[[cells]]\nname="c"\nagents={default="policy/random"}',
         ["prompt_version", "v9"]),
        ('name = "x"\nvariant="classic"\n[design]\ntargets=["fake/a"]\nbackgrounds=["fake/b"]', ["mini-mafia"]),
    ],
)
def test_errors_name_file_field_and_value(tmp_path: Path, text: str, expected: list[str]) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UserError) as info:
        load_experiment(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in expected:
        assert fragment in message


def test_not_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not valid TOML"):
        load_experiment(write(tmp_path, "name = "))
    with pytest.raises(UserError, match="not found"):
        load_experiment(tmp_path / "nope.toml")


def test_default_model_settings_fill_unlisted_models() -> None:
    exp = parse_experiment(
        minimal(
            cells=[{"name": "c", "agents": {"mafioso": "fake/a", "default": "fake/b", "detective": "policy/informed"}}],
            models={"default": {"max_attempts": 2}, "fake/a": {"max_attempts": 4}},
        )
    )
    settings = exp.model_settings()
    assert settings["fake/a"].max_attempts == 4
    assert settings["fake/b"].max_attempts == 2
    assert "policy/informed" not in settings


def test_endpoints_prices_and_keys_are_not_checked_at_load() -> None:
    """`preview` must work without keys: a model of a keyed provider validates without its key."""
    exp = parse_experiment(
        minimal(
            cells=[{"name": "c", "agents": {"default": "openai/gpt-4.1-mini"}}],
            endpoints={"box": {"kind": "openai", "base_url": "http://127.0.0.1:1/v1", "key_required": False}},
            prices=[{"provider": "box", "model": "*", "input": 1.0, "output": 2.0}],
        )
    )
    assert "box" in exp.endpoint_configs()
    assert exp.prices[0].spec == "box/*"


def test_a_key_in_an_endpoint_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'name = "x"\n[[cells]]\nname="c"\nagents={default="box/m"}\n[endpoints.box]\nkind="openai"\napi_key="sk-1"',
    )
    with pytest.raises(UserError, match="api_key"):
        load_experiment(path)


def test_background_tables_and_string_backgrounds_mix() -> None:
    exp = parse_experiment(
        {
            "name": "mix",
            "design": {
                "targets": ["fake/a"],
                "backgrounds": [
                    "fake/b",
                    {"name": "mixed", "mafioso": "fake/b", "detective": "fake/c", "villager": "policy/random"},
                ],
            },
        }
    )
    assert exp.design is not None
    assert set(exp.agent_specs()) == {"fake/a", "fake/b", "fake/c", "policy/random"}

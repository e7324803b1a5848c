"""Every bad input of the fault and fuzz audit gets a clear `UserError` naming the file, the field and the value before
anything is spent (or, for a dataset, the game is reported unreadable with its reason, never landed as valid); and a
fuzz test over experiment and play files (types, bounds, encodings, unknown fields) never sees a traceback."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mafiabench.errors import UserError
from mafiabench.importers import UnreadableGame, read_dallinger, read_llmafia
from mafiabench.play.config import load_game_config
from mafiabench.study.spec import Experiment, load_experiment

ROOT = Path(__file__).resolve().parents[2]
DATASETS = Path(__file__).parents[1] / "fixtures" / "datasets"

EXPERIMENT = """name = "bad"
games_per_cell = 2
[[cells]]
name = "c"
agents = { default = "fake/m" }
"""


def error_of(path: Path, loader: Any = load_experiment) -> str:
    with pytest.raises(UserError) as err:
        loader(path)
    return str(err.value)


def write(tmp_path: Path, text: str, name: str = "exp.toml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


# -- files that cannot be read ------------------------------------------------------------------------------------


@pytest.mark.parametrize("loader", [load_experiment, load_game_config])
def test_non_utf8_and_directory_paths_are_named(tmp_path: Path, loader: Any) -> None:
    latin = tmp_path / "latin1.toml"
    latin.write_bytes('name = "caf\u00e9"\n'.encode("latin-1"))
    msg = error_of(latin, loader)
    assert str(latin) in msg and "not UTF-8" in msg and "offset 11" in msg
    folder = tmp_path / "a-folder.toml"
    folder.mkdir()
    msg = error_of(folder, loader)
    assert str(folder) in msg and "is a directory" in msg


# -- experiment fields ----------------------------------------------------------------------------------------------


def test_a_huge_games_per_cell_is_refused_at_once_without_building_the_plan(tmp_path: Path) -> None:
    p = write(tmp_path, EXPERIMENT.replace("games_per_cell = 2", "games_per_cell = 1000000000000"))
    t0 = time.perf_counter()
    msg = error_of(p)
    assert time.perf_counter() - t0 < 2.0
    assert str(p) in msg and "games_per_cell" in msg and "1000000000000" in msg and "less than or equal" in msg


def test_many_cells_within_the_per_cell_bound_are_refused_by_the_total(tmp_path: Path) -> None:
    cells = "".join(f'[[cells]]\nname = "c{i}"\nagents = {{ default = "policy/random" }}\n' for i in range(3))
    p = write(tmp_path, f'name = "big"\ngames_per_cell = 900000\n{cells}')
    msg = error_of(p)
    assert str(p) in msg and "2,700,000 games" in msg
    assert Experiment.model_fields["games_per_cell"].metadata  # bounded


def test_a_boolean_games_per_cell_is_not_one_game(tmp_path: Path) -> None:
    msg = error_of(write(tmp_path, EXPERIMENT.replace("games_per_cell = 2", "games_per_cell = true")))
    assert "games_per_cell" in msg and "True" in msg and "valid integer" in msg


@pytest.mark.parametrize(
    "options,expected",
    [
        ("p_rate_limit = 7.5", ["p_rate_limit", "7.5", "[0, 1]"]),
        ("p_meteor = 0.1", ["p_meteor", "unknown fake endpoint option"]),
        ('latency_ms = "slow"', ["latency_ms", "'slow'", "must be a number"]),
    ],
)
def test_fake_provider_options_are_checked_where_the_file_is_read(
    tmp_path: Path, options: str, expected: list[str]
) -> None:
    p = write(tmp_path, EXPERIMENT + f'[endpoints.fake]\nkind = "fake"\noptions = {{ {options} }}\n')
    msg = error_of(p)
    assert str(p) in msg and "endpoints.fake" in msg
    for text in expected:
        assert text in msg, msg


def test_negative_token_cap_is_refused(tmp_path: Path) -> None:
    p = write(tmp_path, EXPERIMENT + "[models.default]\nmax_tokens_message = -10\n")
    msg = error_of(p)
    assert str(p) in msg and "models.default.max_tokens_message" in msg and "-10" in msg


def test_preview_refuses_bad_fake_options_before_anything_is_spent(tmp_path: Path) -> None:
    p = write(tmp_path, EXPERIMENT + '[endpoints.fake]\nkind = "fake"\noptions = { p_rate_limit = 7.5 }\n')
    proc = subprocess.run(
        [sys.executable, "-m", "mafiabench.cli", "preview", str(p)],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert str(p) in proc.stderr and "p_rate_limit" in proc.stderr and "7.5" in proc.stderr


# -- play --config ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "agents,expected",
    [
        ('mafioso = "gpt-4o"', ["agents.mafioso", "'gpt-4o'", "provider/model"]),
        ('detective = "policy/sleepy"', ["agents.detective", "policy/sleepy", "unknown policy"]),
        ('villager = "nowhere/m"', ["agents.villager", "unknown provider 'nowhere'"]),
        ("mafioso = 7", ["agents.mafioso", "7", "valid string"]),
    ],
)
def test_play_config_agent_errors_name_file_and_field(tmp_path: Path, agents: str, expected: list[str]) -> None:
    p = write(tmp_path, f"seed = 1\n[agents]\ndefault = \"policy/random\"\n{agents}\n", "game.toml")
    if "nowhere" not in agents:  # syntax and policies: when the file is read; providers: before the first call
        msg = error_of(p, load_game_config)
        assert str(p) in msg
        for text in expected:
            assert text in msg, msg
    proc = subprocess.run(
        [sys.executable, "-m", "mafiabench.cli", "play", "--config", str(p), "--quiet"],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and str(p) in proc.stderr
    for text in expected:
        assert text in proc.stderr, proc.stderr


# -- datasets --------------------------------------------------------------------------------------------------------


def test_llmafia_config_with_players_not_a_list_is_unreadable_with_its_reason(tmp_path: Path) -> None:
    game = tmp_path / "0001"
    shutil.copytree(DATASETS / "llmafia" / "0001", game)
    config = json.loads((game / "config.json").read_text())
    config["players"] = 5
    (game / "config.json").write_text(json.dumps(config))
    (item,) = read_llmafia(tmp_path)
    assert isinstance(item, UnreadableGame)
    assert "config.json" in item.reason and "players" in item.reason and "5" in item.reason


@pytest.mark.parametrize("cut", ["inside-a-quoted-field", "fewer-fields"])
def test_dallinger_info_csv_cut_mid_row_does_not_land_as_a_valid_game(tmp_path: Path, cut: str) -> None:
    name = "4c5d6e7f-8091-a2b3-c4d5-e6f708192a3b-data"  # the valid real-shaped game
    game = tmp_path / name
    shutil.copytree(DATASETS / "dallinger" / name, game)
    (whole,) = read_dallinger(game)
    assert not isinstance(whole, UnreadableGame) and whole.validity["valid"]  # the intact export is a valid game
    info = game / "info.csv"
    text = info.read_text(encoding="utf-8")
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    if cut == "inside-a-quoted-field":  # a message with a comma is quoted; the file ends inside it
        cut_text = text + '21,2021-03-05 20:02:00.000000,,,,,,,f,,text,4,1,"Cy Diaz: I think, maybe'
    else:  # the last row stops after two fields
        cut_text = text.rstrip("\n")[: len(text.rstrip("\n")) - len(last) + last.index(",", last.index(",") + 1)]
    info.write_text(cut_text, encoding="utf-8")
    (item,) = read_dallinger(game)
    assert isinstance(item, UnreadableGame), "a cut export must not land as a game"
    assert "info.csv" in item.reason and ("cut" in item.reason), item.reason


# -- fuzz ------------------------------------------------------------------------------------------------------------


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string (a lone surrogate makes it invalid TOML: also a bad input)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def toml_doc(data: dict[str, Any]) -> str:
    return "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in data.items())


scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 10**12, 2**63, -10]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["fake/m", "policy/random", "policy/nope", "gpt-4o", "nowhere/m", "mini-mafia", "classic", ""]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
EXPERIMENT_BASE: dict[str, Any] = {
    "name": "fuzz",
    "games_per_cell": 2,
    "cells": [{"name": "c", "agents": {"default": "fake/m"}}],
}
EXPERIMENT_PATHS = [
    ("name",), ("games_per_cell",), ("seed",), ("variant",), ("shard_size",), ("rules",),
    ("rules", "discussion_rounds"),
    ("cells", 0, "games"), ("cells", 0, "agents", "default"), ("cells", 0, "agents", "mafioso"), ("cells", 0, "rules"),
    ("design",), ("design", "targets"), ("models",), ("models", "default", "max_tokens_message"),
    ("models", "default", "temperature"), ("models", "default", "max_attempts"), ("endpoints", "fake"),
    ("endpoints", "fake", "options"), ("endpoints", "fake", "kind"), ("concurrency", "games"), ("budget", "max_usd"),
    ("budget", "max_tokens"), ("prices",), ("prompt_version",), ("warehouse",), ("meteor",), ("cells", 0, "meteor"),
]
GAME_BASE: dict[str, Any] = {"seed": 1, "agents": {"default": "policy/random"}}
GAME_PATHS = [
    ("seed",), ("variant",), ("game_id",), ("rules",), ("rules", "discussion_rounds"), ("rules", "night"),
    ("agents",), ("agents", "mafioso"), ("agents", "default"), ("models",), ("models", "fake/m", "max_tokens_choice"),
    ("endpoints", "box"), ("endpoints", "box", "kind"), ("endpoints", "box", "options"), ("prompt_version",),
    ("meteor",),
]


def mutate(base: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(base))
    node = data
    for key in path[:-1]:
        if isinstance(key, int):
            node = node[key]
        else:
            node = node.setdefault(key, {}) if isinstance(node, dict) else node
            if not isinstance(node, dict):
                return data
    if isinstance(node, dict):
        node[path[-1]] = value
    return data


encodings = st.sampled_from(["utf-8", "utf-8", "utf-8", "latin-1", "utf-16", "cut"])


def check_file(tmp_path: Path, name: str, text: str, encoding: str, loader: Any) -> None:
    path = tmp_path / name
    if encoding == "cut":
        data = text.encode("utf-8", "surrogatepass")[: max(1, len(text) // 2)] + b"\xff"
    else:
        data = text.encode(encoding, "replace")
    path.write_bytes(data)
    try:
        loader(path)
    except UserError as exc:
        msg = str(exc)
        assert str(path) in msg and "Traceback" not in msg and msg.strip()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(EXPERIMENT_PATHS), value=values, encoding=encodings)
def test_fuzz_experiment_files_fail_only_with_a_clear_user_error(
    tmp_path: Path, path: tuple[Any, ...], value: Any, encoding: str
) -> None:
    check_file(tmp_path, "fuzz.toml", toml_doc(mutate(EXPERIMENT_BASE, path, value)), encoding, load_experiment)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(GAME_PATHS), value=values, encoding=encodings)
def test_fuzz_play_files_fail_only_with_a_clear_user_error(
    tmp_path: Path, path: tuple[Any, ...], value: Any, encoding: str
) -> None:
    check_file(tmp_path, "game.toml", toml_doc(mutate(GAME_BASE, path, value)), encoding, load_game_config)

"""Design expansion: deterministic ids and seeds, the background design's cells, and the preview estimate."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from mafiabench.cli import main as cli_main
from mafiabench.engine import derive_seed
from mafiabench.study.design import expand, expand_cells, game_id
from mafiabench.study.estimate import estimate_plan
from mafiabench.study.spec import load_experiment, parse_experiment

ROOT = Path(__file__).resolve().parents[2]
DESIGN_KEYS = {"experiment", "cell", "game_index", "capabilities", "target", "background"}


def backgrounds(targets: list[str], bgs: list[object], **over: object) -> dict[str, object]:
    data: dict[str, object] = {"name": "bg", "games_per_cell": 3, "design": {"targets": targets, "backgrounds": bgs}}
    data.update(over)
    return data


def test_same_file_same_ids_and_seeds() -> None:
    a = expand(load_experiment(ROOT / "experiments" / "demo.toml"))
    b = expand(load_experiment(ROOT / "experiments" / "demo.toml"))
    assert [(g.game_id, g.seed) for g in a] == [(g.game_id, g.seed) for g in b]
    assert len({g.game_id for g in a}) == len(a)
    assert len({g.seed for g in a}) == len(a)


def test_full_background_design_has_14000_games_and_homogeneous_cells_once() -> None:
    exp = load_experiment(ROOT / "experiments" / "mini_mafia_backgrounds.toml")
    cells = expand_cells(exp)
    assert len(cells) == 10 * 5 * 3 - 5 * 2
    assert sum(c.games for c in cells) == 14_000
    homogeneous = [c for c in cells if c.homogeneous]
    assert len(homogeneous) == 5
    assert all(c.capabilities == ("deceive", "detect", "disclose") for c in homogeneous)
    per_cap = Counter(cap for c in cells for cap in c.capabilities)
    assert per_cap == {"deceive": 50, "detect": 50, "disclose": 50}  # every (target, background) once per capability


def test_target_plays_the_capability_role() -> None:
    exp = parse_experiment(backgrounds(["fake/t"], ["fake/b"]))
    cells = {c.capabilities: c for c in expand_cells(exp)}
    assert cells[("deceive",)].agents == {"mafioso": "fake/t", "detective": "fake/b", "villager": "fake/b"}
    assert cells[("detect",)].agents == {"mafioso": "fake/b", "detective": "fake/b", "villager": "fake/t"}
    assert cells[("disclose",)].agents == {"mafioso": "fake/b", "detective": "fake/t", "villager": "fake/b"}
    for c in cells.values():
        assert c.target == "fake/t" and c.background == "fake/b"


def test_design_dict_has_exactly_the_warehouse_keys_and_seeds_derive_from_experiment_cell_index() -> None:
    exp = parse_experiment(backgrounds(["fake/t", "fake/b"], ["fake/b"]))
    games = expand(exp)
    for g in games:
        assert set(g.design) == DESIGN_KEYS
        assert g.design["experiment"] == "bg" and g.design["cell"] == g.cell.name
        assert g.seed == derive_seed("bg", g.cell.name, g.index)
        spec = g.spec(exp)
        assert spec.design == g.design and spec.seed == g.seed and spec.game_id == g.game_id
    homog = [g for g in games if g.cell.homogeneous]
    assert len(homog) == 3 and homog[0].design["capabilities"] == ["deceive", "detect", "disclose"]


def test_growing_an_experiment_never_renames_games_already_planned() -> None:
    small = {g.game_id: g.seed for g in expand(parse_experiment(backgrounds(["fake/t"], ["fake/b"])))}
    bigger = parse_experiment(
        backgrounds(["fake/t", "fake/u"], ["fake/b", "fake/t"], games_per_cell=5)
    )  # more targets, more backgrounds, more games
    big = {g.game_id: g.seed for g in expand(bigger)}
    assert small.items() <= big.items()
    only_deceive = parse_experiment(
        {"name": "bg", "games_per_cell": 3,
         "design": {"targets": ["fake/t"], "backgrounds": ["fake/t"], "capabilities": ["deceive"]}}
    )  # a homogeneous cell keeps its name whatever capabilities it serves
    all_caps = parse_experiment(backgrounds(["fake/t"], ["fake/t"]))
    assert [g.game_id for g in expand(only_deceive)] == [g.game_id for g in expand(all_caps)]


def test_base_seed_salts_ids_and_seeds() -> None:
    a = expand(parse_experiment(backgrounds(["fake/t"], ["fake/b"])))
    b = expand(parse_experiment(backgrounds(["fake/t"], ["fake/b"], seed=7)))
    assert not {g.game_id for g in a} & {g.game_id for g in b}
    assert not {g.seed for g in a} & {g.seed for g in b}
    assert all(g.design["experiment"] == "bg" for g in b)


def test_ids_are_safe_file_names_and_distinct_for_similar_cells() -> None:
    exp = parse_experiment(
        {
            "name": "ids",
            "cells": [
                {"name": "a/b", "agents": {"default": "policy/random"}},
                {"name": "a_b", "agents": {"default": "policy/random"}},
                {"name": "weird: ünïcode | name", "agents": {"default": "policy/random"}},
            ],
            "games_per_cell": 2,
        }
    )
    ids = [g.game_id for g in expand(exp)]
    assert len(set(ids)) == len(ids) == 6
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", i) for i in ids)
    cell = expand_cells(exp)[0]
    assert game_id(exp, cell, 3).endswith(".00003")


def test_custom_background_table() -> None:
    exp = parse_experiment(
        backgrounds(
            ["fake/t"],
            [{"name": "mixed", "mafioso": "fake/m", "detective": "fake/d", "villager": "policy/random"}],
        )
    )
    cells = {c.capabilities[0]: c for c in expand_cells(exp)}
    assert cells["deceive"].agents == {"mafioso": "fake/t", "detective": "fake/d", "villager": "policy/random"}
    assert cells["detect"].agents == {"mafioso": "fake/m", "detective": "fake/d", "villager": "fake/t"}
    assert all(c.background == "mixed" and not c.homogeneous for c in cells.values())


def test_estimate_counts_calls_tokens_and_cost_without_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    exp = parse_experiment(
        {
            "name": "est",
            "games_per_cell": 10,
            "cells": [
                {"name": "priced", "agents": {"default": "openai/gpt-4.1-mini"}},
                {"name": "policies", "agents": {"default": "policy/random"}},
                {"name": "unpriced", "agents": {"default": "openai/some-future-model"}},
            ],
        }
    )
    est = estimate_plan(exp, samples=2)
    by = {c.cell.name: c for c in est.cells}
    assert by["priced"].calls_per_game == 9  # two rounds of three speakers, then three votes
    assert by["priced"].usage_per_game.output_tokens == 6 * 55 + 3 * 5  # counted at the reference token caps
    assert by["priced"].usage_per_game.cost_usd > 0
    assert by["policies"].calls_per_game == 0 and by["policies"].usage_per_game.cost_usd == 0
    assert by["unpriced"].usage_per_game.unpriced == {"openai/some-future-model"}
    assert est.total().calls == 2 * 9 * 10 and est.games == 30


def test_preview_command_prints_cells_games_calls_and_cost(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["preview", str(ROOT / "experiments" / "demo.toml"), "--samples", "1"]) == 0
    out = capsys.readouterr().out
    assert "homogeneous|fake/alpha" in out and "deceive+detect+disclose" in out
    assert "540 games" in out and "model calls" in out and "$" in out


def test_preview_shows_full_cell_names(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    long = "openrouter/meta-llama/llama-3.3-70b-instruct-with-a-very-long-deployment-suffix"
    exp = tmp_path / "long.toml"
    exp.write_text(
        'name = "long"\ngames_per_cell = 2\n[design]\n'
        f'targets = ["fake/{long}"]\nbackgrounds = ["fake/{long}-b"]\ncapabilities = ["deceive"]\n'
    )
    assert cli_main(["preview", str(exp), "--samples", "1"]) == 0
    out = capsys.readouterr().out
    assert f"deceive|fake/{long}|fake/{long}-b" in out  # never cut

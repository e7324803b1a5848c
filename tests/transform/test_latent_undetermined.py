"""A latent ability the design does not determine is not identified, however narrow its prior makes it, and stays
out of the normalisation: the real case is the Mini-Mafia web game's people, who played against gpt-4o-mini, a
model no benchmark game saw (docs/data.md), so their deceive and detect cannot be placed against the benchmark's
models while their disclose (against GPT-5 Mini) can."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest

from mafiabench.importers.common import mini_mafia_design
from mafiabench.transform.models.latent import (
    DEFAULT_RIDGE,
    UNDETERMINED_NOTE,
    _map_rows,
    fit_latent_nuts,
    undetermined,
)
from support.published_mini_mafia import GAMES_PER_CELL, published_cells
from support.records import MAFIA_WIN_VOTES, TOWN_WIN_VOTES, landed, mini_record, rows

Cell = tuple[str, str, str, int, int]


def complete(models: list[str], strength: dict[str, float], n: int = 200) -> list[Cell]:
    """Every (mafioso, villager, detective) of `models`, n games each, the mafia's wins at their expected count
    under logit p = (a_i - b_j) with a = b = the model's strength (villagers equal)."""
    out = []
    for m, v, d in itertools.product(models, repeat=3):
        p = 1 / (1 + np.exp(-(strength[m] - 0.5 * strength[d])))
        out.append((m, v, d, n, round(n * p)))
    return out


def test_the_published_design_leaves_nothing_out() -> None:
    """Every model of the published design plays every role: nothing is left out. (An empty design leaves nothing
    out either, so the design is checked to be the published one first.)"""
    cells = [(m, v, d, GAMES_PER_CELL, w) for (m, v, d), (w, *_) in published_cells().items()]
    assert len(cells) == 140 and len({c[0] for c in cells}) == 10
    assert undetermined(cells) == {"a": set(), "b": set(), "c": set()}
    assert undetermined([]) == {"a": set(), "b": set(), "c": set()}  # no games: nothing to place, nothing flagged


def test_the_web_games_people_against_a_model_no_other_game_saw() -> None:
    """The real databases' three cells (tests/importers/test_import_mini_mafia_web.py reads them): the person as
    mafioso and as villager against gpt-4o-mini in both other seats, as detective against GPT-5 Mini."""
    cells = [(m, v, d, GAMES_PER_CELL, w) for (m, v, d), (w, *_) in published_cells().items()]
    cells += [("human", "gpt-4o-mini", "gpt-4o-mini", 36, 12), ("gpt-4o-mini", "human", "gpt-4o-mini", 21, 2),
              ("GPT-5 Mini", "GPT-5 Mini", "human", 13, 5)]
    assert undetermined(cells) == {"a": {"human", "gpt-4o-mini"}, "b": {"gpt-4o-mini"},
                                   "c": {"human", "gpt-4o-mini"}}
    # Against the model the study's script said they played (GPT-4.1 Mini, in the benchmark), all are placed.
    cells[-3:-1] = [("human", "GPT-4.1 Mini", "GPT-4.1 Mini", 46, 20), ("GPT-4.1 Mini", "human", "GPT-4.1 Mini", 21, 2)]
    assert undetermined(cells) == {"a": set(), "b": set(), "c": set()}


@pytest.mark.parametrize(("extra", "loose"), [
    ([("X", "A", "A", 50, 20)], {"a": set(), "b": set(), "c": set()}),  # c_A (a_X - b_A): a_X from known c_A, b_A
    ([("X", "Y", "Z", 50, 20)], {"a": {"X"}, "b": {"Z"}, "c": {"Y"}}),  # one number for three new parameters
    ([("X", "Y", "A", 50, 20), ("X", "Y", "B", 50, 30)], {"a": set(), "b": set(), "c": set()}),  # c_Y, a_X: 2 cells
    ([("X", "Y", "A", 50, 20), ("X", "Y", "A", 40, 10)], {"a": {"X"}, "b": set(), "c": {"Y"}}),  # one cell twice
])
def test_by_hand(extra: list[Cell], loose: dict[str, set[str]]) -> None:
    base = complete(["A", "B"], {"A": 0.3, "B": -0.3}, n=50)
    assert len(base) == 8 and undetermined(base) == {"a": set(), "b": set(), "c": set()}
    assert undetermined(base + extra) == loose


@pytest.mark.slow
def test_an_island_of_unplaced_models_moves_no_placed_estimate() -> None:
    """NUTS on three models in every role, then with an island cell (X, Y, Z) beside them: the island's abilities
    are not placed (the mart's rows say not identified), and the three models' draws are those of the fit without
    it, bit for bit: the island is a part of the design sampled apart (`components`; the models' part first, with
    the same seed), and the normalisation (mean(m) = 0, mean(v) = 1) is over placed models only (over every model,
    X's prior-drawn deceive would enter every draw's mean(a))."""
    base = complete(["A", "B", "C"], {"A": 0.6, "B": 0.0, "C": -0.6})
    alone = fit_latent_nuts(base)
    both = fit_latent_nuts([*base, ("X", "Y", "Z", 30, 27)])
    assert both.undetermined == {"m": ["X"], "d": ["Z"], "v": ["Y"]} and alone.undetermined == {"m": [], "d": [],
                                                                                                "v": []}
    assert (alone.coordinates, both.coordinates) == ("gauge", "gauge + gauge")
    for parameter in ("m", "d", "v"):
        for name in ("A", "B", "C"):
            i, j = alone.models[parameter].index(name), both.models[parameter].index(name)
            assert np.array_equal(alone.draws[parameter][..., i], both.draws[parameter][..., j]), (parameter, name)
    placed = [both.models["m"].index(n) for n in ("A", "B", "C")]
    assert both.estimate["m"][placed].mean() == pytest.approx(0, abs=1e-9)
    placed_v = [both.models["v"].index(n) for n in ("A", "B", "C")]
    assert both.estimate["v"][placed_v].mean() == pytest.approx(1, abs=1e-9)
    x = both.models["m"].index("X")
    assert both.sd["m"][x] > both.sd["m"][placed].max()  # the prior's spread, wider than any placed model's


def _map(cells: list[Cell]) -> dict[tuple[str, str], tuple[float, float]]:
    """The point estimate's rows (`MAFIABENCH_LATENT_METHOD=map`) on cells: (model, parameter) -> (estimate, se)."""
    frame = pl.DataFrame(cells, schema=["mafioso_model", "villager_model", "detective_model", "n", "w"], orient="row")
    games_by: dict[str, dict[str, int]] = {"mafioso": {}, "detective": {}, "villager": {}}
    for m, v, d, n, _ in cells:
        for role, name in (("mafioso", m), ("villager", v), ("detective", d)):
            games_by[role][name] = games_by[role].get(name, 0) + n
    rows, _ = _map_rows("s", None, frame, games_by, DEFAULT_RIDGE)
    return {(r["model"], r["parameter"]): (r["estimate"], r["se"]) for r in rows}


def test_an_island_moves_no_placed_point_estimate() -> None:
    """The point estimate's constraints (sum(a) + sum(b) = 0, sum(log c) = 0) run over the placed models, as the NUTS
    normalisation's means do: the island's parameters are their prior's and its own games', and the three placed
    models' estimates and sds are those of the fit without it (over every model, the island's prior-placed values
    entered the sums and moved them all)."""
    base = complete(["A", "B", "C"], {"A": 0.6, "B": 0.0, "C": -0.6})
    alone, both = _map(base), _map([*base, ("X", "Y", "Z", 30, 27)])
    assert set(both) - set(alone) == {("X", "a"), ("Z", "b"), ("Y", "c")}
    for k, (estimate, se) in alone.items():
        assert both[k][0] == pytest.approx(estimate, abs=1e-5), k
        assert both[k][1] == pytest.approx(se, rel=1e-3), k
    assert sum(both[(n, p)][0] for n in "ABC" for p in "ab") == pytest.approx(0, abs=1e-6)


@pytest.mark.parametrize("method", ["map", pytest.param("nuts", marks=pytest.mark.slow)])
def test_the_mart_marks_the_unplaced_models_not_identified(method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the build: games of A and B in every role and a few of an island (X, Y, Z); the latent mart's rows
    for X's deceive, Z's disclose and Y's detect say not identified, with no interval, in both methods, and A's and
    B's are placed."""
    monkeypatch.setenv("MAFIABENCH_LATENT_METHOD", method)
    rng = np.random.default_rng(3)
    records = []
    lineups = [*itertools.product("AB", repeat=3), ("X", "Y", "Z")]
    for m, v, d in lineups:
        for i in range(12):
            models = {"mafioso": m, "villager": v, "detective": d}
            records.append(mini_record(
                f"g-{m}{v}{d}-{i:02d}", models=models, votes=MAFIA_WIN_VOTES if rng.random() < 0.45 else TOWN_WIN_VOTES,
                design={"experiment": "island", "game_index": i, **mini_mafia_design(models)}))
    con = landed(records, only=["mart_latent_fit", "mart_latent_abilities"])
    out = {(r["model"], r["ability"]): r for r in rows(con, "select * from mart_latent_abilities")}
    assert len(out) == 9  # A and B in three roles, X, Y and Z in one each
    for key in (("X", "deceive"), ("Z", "disclose"), ("Y", "detect")):
        r = out[key]
        assert (r["identified"], r["ci_low"], r["ci_high"]) == (False, None, None), key
        assert r["note"].startswith(UNDETERMINED_NOTE), (key, r["note"])  # nuts may add that its prior mixed slowly
    for name in "AB":
        for ability in ("deceive", "detect", "disclose"):
            r = out[(name, ability)]
            assert r["method"] == method and UNDETERMINED_NOTE not in (r["note"] or ""), (name, ability, r["note"])
    (fit,) = rows(con, "select coordinates from mart_latent_fit")
    assert fit["coordinates"] == {"map": None, "nuts": "gauge + gauge"}[method]  # the models' part, then the island

"""A Mini-Mafia study rates mafioso, detective and villager separately: roles stay apart through the line-up
aggregation and a fit by role recovers planted role strengths that the side rating would merge."""

from __future__ import annotations

import numpy as np
from scipy import special, stats

from mafiabench.transform.models.ratings import fit, line_ups, rating_tables, summarise
from support.rating_warehouse import warehouse


def test_a_detective_and_a_villager_of_the_same_models_are_different_line_ups() -> None:
    """Detective A with villagers B, B against detective B with villagers A, B: the same seats by model (sorting
    seats merged them before), two line-ups by role."""
    games = [([("mafioso", "C")], [("detective", "A"), ("villager", "B"), ("villager", "B")], True),
             ([("mafioso", "C")], [("detective", "B"), ("villager", "A"), ("villager", "B")], False),
             ([("mafioso", "C")], [("villager", "B"), ("detective", "A"), ("villager", "B")], False)]
    data = line_ups(games)
    assert list(data.roles) == ["mafioso", "detective", "villager"]
    assert sorted(data.games.tolist()) == [1, 2] and data.special_roles
    row = int(np.argmax(data.games))
    assert data.roles["detective"][1][row].tolist() == [1 / 3, 0, 0]
    assert data.roles["villager"][1][row].tolist() == [0, 2 / 3, 0]
    assert data.town[row].tolist() == [1 / 3, 2 / 3, 0]


def _mini_mafia(seed: int, n_games: int = 8000) -> tuple[list[dict], dict[str, np.ndarray]]:
    """Random Mini-Mafia games of six models whose detective and villager strengths are planted apart (drawn
    independently), so a model can disclose well and detect badly."""
    rng = np.random.default_rng(seed)
    truth = {role: rng.normal(0, 1, 6) for role in ("mafioso", "detective", "villager")}
    names = [f"m{i}" for i in range(6)]
    games = []
    for g in range(n_games):
        i, j, k = rng.choice(6, 3, replace=False)
        eta = -0.3 + truth["mafioso"][i] - (truth["detective"][j] + 2 * truth["villager"][k]) / 3
        games.append({"study": "mm", "id": f"g{g:05d}", "mafia": [("mafioso", names[i])],
                      "town": [("detective", names[j]), ("villager", names[k]), ("villager", names[k])],
                      "mafia_won": bool(rng.random() < special.expit(eta))})
    return games, {r: v - v.mean() for r, v in truth.items()}


def test_a_mini_mafia_study_rates_mafioso_detective_and_villager_separately() -> None:
    games, truth = _mini_mafia(7)
    tables = rating_tables(warehouse(games, variant="mini-mafia"))
    ratings = tables["mart_ratings"]
    assert set(ratings["side"]) == {"overall", "mafia", "town", "mafioso", "detective", "villager"}
    assert sorted(tables["mart_rating_fit"]["fit"]) == ["overall", "roles", "sides"]
    for role in ("mafioso", "detective", "villager"):
        rows = ratings.filter(ratings["side"] == role).sort("model").to_dicts()
        assert all(r["rated"] and r["rank"] is not None for r in rows)
        rho = stats.spearmanr([r["rating"] for r in rows], truth[role]).statistic
        assert rho >= 0.9, (role, rho)
    # The town side alone cannot tell the two abilities apart; the role fit does (its held-out log loss is lower).
    fits = {r["fit"]: r for r in tables["mart_rating_fit"].to_dicts()}
    assert fits["roles"]["log_loss"] < fits["sides"]["log_loss"]
    # The reference's latent model is the baseline of a Mini-Mafia design (one villager model per line-up here).
    assert all(0 < f["brier_latent"] < 0.25 for f in fits.values())


def test_a_side_with_one_role_is_not_split() -> None:
    games = [([m], [t, t, t], bool(i % 2)) for i, (m, t) in enumerate([("A", "B"), ("B", "A")] * 10)]
    data = line_ups(games)
    assert not data.special_roles and list(data.roles) == ["mafia", "town"]
    post = fit(data, kind="roles")
    assert [b.name for b in post.blocks] == ["mafia", "town"]
    assert summarise("s", "mafia", data, post, "mafia")[0]["model"] == "A"

"""The last-speaker rows with the game as the unit (mart_last_speaker_bias's `*_by_game` columns, from the summed
int_last_speaker_game_patterns).

A classic game's final discussion holds several villagers, who share their team's outcome: counted as independent
players (the Beta sd, the Mini-Mafia paper's unit) their rate's interval is too narrow. The mart's by-game sds are
checked three ways: against the cluster-robust sandwich of a least-squares fit computed here from the players (numpy,
another road to the same estimator) on games the real engine played; by hand on Mini-Mafia games; and by simulation
with outcomes shared within games and a win probability that varies from game to game (a model the Beta sd assumes
away), where the by-game interval covers and the players' does not.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest

from support.records import engine_records, landed, rows

READ = ["mart_last_speaker_bias"]
GROUP = "is_scored and had_discussion and active_in_final_discussion"


@pytest.fixture(scope="module")
def con():
    records = [*engine_records(24, seed=5, variant="classic", rules={"n_players": 8}),
               *engine_records(12, seed=6)]
    return landed(records, only=READ)


def sandwich_sd(y: np.ndarray, x: np.ndarray, clusters: list[str]) -> np.ndarray:
    """Least squares of y on x, cluster-robust standard errors with the factor G / (G - 1): the sds of the
    coefficients."""
    bread = np.linalg.inv(x.T @ x)
    beta = bread @ x.T @ y
    u = y - x @ beta
    scores: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(x.shape[1]))
    for i, c in enumerate(clusters):
        scores[c] = scores[c] + x[i] * u[i]
    s = np.array(list(scores.values()))
    g = len(scores)
    cov = g / (g - 1) * bread @ (s.T @ s) @ bread
    return np.sqrt(np.diag(cov))


def test_the_by_game_sds_are_the_cluster_robust_sandwich(con) -> None:
    players: dict[tuple[str, str], list[tuple[str, bool, int]]] = defaultdict(list)
    for variant, role, game_id, spoke_last, won in con.execute(
            f"select variant, role, game_id, spoke_last, won::int from fct_player_games where {GROUP}").fetchall():
        players[(variant, role)].append((game_id, spoke_last, won))
        players[(variant, "all")].append((game_id, spoke_last, won))
    mart = {(r["variant"], r["role"], r["spoke_last"]): r for r in rows(con, "select * from mart_last_speaker_bias")}
    assert {v for v, _, _ in mart} == {"classic", "mini-mafia"}
    shared = 0
    for (variant, role), group in players.items():
        games = [g for g, _, _ in group]
        y = np.array([w for _, _, w in group], dtype=float)
        last = np.array([s for _, s, _ in group], dtype=float)
        total = mart[(variant, role, True)] if (variant, role, True) in mart else mart[(variant, role, False)]
        assert total["total_games"] == len(set(games))
        assert total["total_sd_by_game"] == pytest.approx(sandwich_sd(y, np.ones((len(y), 1)), games)[0], rel=1e-9)
        for spoke in (True, False):
            row = mart.get((variant, role, spoke))
            mask = last == spoke
            if row is None:
                assert not mask.any()
                continue
            ids = [g for g, m in zip(games, mask, strict=True) if m]
            assert (row["n"], row["games"]) == (int(mask.sum()), len(set(ids)))
            shared += row["n"] > row["games"]
            assert row["sd_by_game"] == pytest.approx(sandwich_sd(y[mask], np.ones((len(ids), 1)), ids)[0],
                                                      rel=1e-9, abs=1e-12)
        row = mart.get((variant, role, True))
        if row is not None and (variant, role, False) in mart:
            # y on (1, spoke_last): the slope is the difference of the two groups' rates.
            sd = sandwich_sd(y, np.column_stack([np.ones(len(y)), last]), games)[1]
            assert row["advantage_sd_by_game"] == pytest.approx(sd, rel=1e-9)
            n_other = mart[(variant, role, False)]["n"]
            assert row["advantage_vs_all_games_sd_by_game"] == pytest.approx(n_other / row["total_n"] * sd, rel=1e-9)
    # The classic villagers who did not speak last, and the rest of every role `all` but the last speaker: rows whose
    # games hold several of their players.
    assert mart[("classic", "villager", False)]["n"] > mart[("classic", "villager", False)]["games"]
    assert mart[("mini-mafia", "all", False)]["n"] == 2 * mart[("mini-mafia", "all", False)]["games"]
    assert shared >= 3


def test_by_hand_on_mini_mafia_games() -> None:
    """Three games in which the mafioso spoke last, won in two (p = 2/3): the residuals 1/3, 1/3, -2/3 sum to 6/9
    squared, so sd = sqrt(3/2 * 6/9) / 3 = 1/3; two games it did not speak last and lost (p = 0, sd 0). Their
    difference over the five games, each holding one mafioso (no cross term): sqrt(5/4 * (6/9) / 3^2) = sqrt(30) / 18.
    """
    from support.records import MAFIA_WIN_VOTES, TOWN_WIN_VOTES, mini_record, one

    last = [("Bob", "a"), ("Charlie", "b"), ("Alice", "c")]
    first = [("Alice", "a"), ("Charlie", "b"), ("Bob", "c")]
    recs = [mini_record(f"last{i}", votes=MAFIA_WIN_VOTES if won else TOWN_WIN_VOTES, messages=last)
            for i, won in enumerate([True, True, False])]
    recs += [mini_record(f"first{i}", votes=TOWN_WIN_VOTES, messages=first) for i in range(2)]
    c = landed(recs, only=READ)
    t = one(c, "select * from mart_last_speaker_bias where role = 'mafioso' and spoke_last")
    f = one(c, "select * from mart_last_speaker_bias where role = 'mafioso' and not spoke_last")
    assert (t["games"], f["games"], t["total_games"]) == (3, 2, 5)
    assert t["sd_by_game"] == pytest.approx(1 / 3)
    assert f["sd_by_game"] == 0
    assert t["advantage_sd_by_game"] == pytest.approx(math.sqrt(30) / 18)
    assert t["advantage_vs_all_games_sd_by_game"] == pytest.approx(2 / 5 * math.sqrt(30) / 18)
    # The mafioso's rate over the five games, 2/5: residuals 3/5, 3/5, -2/5, -2/5, -2/5 -> sum of squares 30/25.
    assert t["total_sd_by_game"] == pytest.approx(math.sqrt(5 / 4 * 30 / 25) / 5)


def _estimate(m: np.ndarray, w: np.ndarray) -> tuple[float, float, float]:
    """The mart's formulas on per-game counts (m players of a group, all won when w): p, the by-game sd, the
    players' Beta sd."""
    k = m * w
    n, kk = m.sum(), k.sum()
    p = kk / n
    g = int((m > 0).sum())
    by_game = math.sqrt(g / (g - 1) * ((k - p * m) ** 2).sum()) / n
    a, b = kk + 1, n - kk + 1
    beta = math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
    return p, by_game, beta


def test_by_simulation_the_by_game_interval_covers_where_the_players_does_not() -> None:
    """200 games, each with 1-4 players of the group in its final discussion who share its outcome, won with a
    probability drawn per game (Beta(3, 3): mean 0.5); 2,000 studies. The 95% interval p +- 1.96 sd holds the mean
    win rate in about 95% of studies with the by-game sd, and in far fewer with the players' Beta sd."""
    rng = np.random.default_rng(20261130)
    hits = {"by_game": 0, "beta": 0}
    studies = 2000
    for _ in range(studies):
        m = rng.integers(1, 5, size=200)
        w = (rng.random(200) < rng.beta(3, 3, size=200)).astype(int)
        p, by_game, beta = _estimate(m, w)
        hits["by_game"] += abs(p - 0.5) <= 1.96 * by_game
        hits["beta"] += abs(p - 0.5) <= 1.96 * beta
    coverage = {k: v / studies for k, v in hits.items()}
    print(f"coverage of 95% intervals over {studies} studies: {coverage}")
    assert 0.93 <= coverage["by_game"] <= 0.97, coverage
    assert coverage["beta"] < 0.85, coverage

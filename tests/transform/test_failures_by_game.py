"""The failure rates with the game as the unit (mart_format_failures' and mart_reasoning_failures' `*_by_game`
columns, from the game patterns the summed int_decision_counts and int_reasoning_counts count).

A model takes several decisions of one kind in a game (two or three discussion turns, a vote a day in classic), and
its failures cluster there: a transcript that confuses it confuses it again. Counted as independent decisions (the
binomial's Wilson interval) the rate's interval is too narrow. The mart's interval counting games is the Wilson
interval on the effective sample size n / design effect (Kish's; the variance counting games over the binomial's, at
least 1). It is checked three ways: the by-game sd against the cluster-robust sandwich computed here with numpy from
the decisions themselves (another road to the same estimator), and the interval against statsmodels' Wilson on the
effective counts; by hand; and by simulation with failures that cluster by game, where it covers and the Wilson
interval counting decisions does not.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from scipy.stats import binomtest, norm

from support.records import TOWN_WIN_VOTES, engine_records, landed, mini_record, one, rows

READ = ["mart_format_failures", "mart_reasoning_failures"]
MODELS = {"mafioso": "M", "detective": "D", "villager": "V"}
# Alice is the mafioso, Bob the detective, Charlie the villager left after the night (mini_record's seats).
ALIVE = ("Alice", "Bob", "Charlie")


def cluster_sd(y: np.ndarray, clusters: list[str]) -> float:
    """The mean of y with cluster-robust variance and the factor G / (G - 1): least squares of y on 1."""
    x = np.ones((len(y), 1))
    bread = np.linalg.inv(x.T @ x)
    u = y - x @ (bread @ x.T @ y)
    scores: dict[str, float] = defaultdict(float)
    for i, c in enumerate(clusters):
        scores[c] += u[i]
    s = np.array(list(scores.values()))[:, None]
    g = len(scores)
    return float(np.sqrt(g / (g - 1) * (bread @ (s.T @ s) @ bread))[0, 0])


def _wilson(k: float, n: float) -> tuple[float, float]:
    """Wilson's score interval at 95% for counts that need not be whole (the effective ones): scipy's, for whole
    ones, is checked against it in `test_the_reference_wilson_is_scipys`."""
    z = norm.ppf(0.975)
    p, d = k / n, 1 + z * z / n
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (p + z * z / (2 * n) - half) / d), min(1.0, (p + z * z / (2 * n) + half) / d)


@pytest.mark.parametrize(("k", "n"), [(0, 3), (2, 5), (7, 7), (123, 4567)])
def test_the_reference_wilson_is_scipys(k, n) -> None:
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert _wilson(k, n) == pytest.approx((ci.low, ci.high), rel=1e-12, abs=1e-15)


def _design_effect(k: int, n: int, sd: float | None) -> float:
    """Kish's: the variance counting games over the binomial's, at least 1; 1 where it cannot be estimated."""
    if sd is None or k in (0, n):
        return 1.0
    return max(1.0, sd * sd / (k / n * (1 - k / n) / n))


def _random_games(rng: np.random.Generator, count: int) -> list:
    """Mini-Mafia games with 1-3 turns each of the three living players, some broken (a silence), and a vote each,
    some a fallback; each game's failure probability drawn on its own (failures cluster by game)."""
    records = []
    for i in range(count):
        p = rng.beta(1, 4)
        turns = [(name, None if rng.random() < p else "x") for _ in range(rng.integers(1, 4)) for name in ALIVE]
        fallback = [name for name in ALIVE if rng.random() < p]
        records.append(mini_record(f"g{i:03d}", models=MODELS, votes=TOWN_WIN_VOTES, messages=turns,
                                   fallback_voters=fallback))
    return records


@pytest.fixture(scope="module")
def con():
    records = [*_random_games(np.random.default_rng(5), 40),
               *engine_records(24, seed=7, variant="classic", rules={"n_players": 8, "detective": True})]
    return landed(records, only=[*READ, "int_decisions", "int_reasoning_opportunities", "fct_games"])


def test_format_failures_by_game_are_the_cluster_robust_sandwich(con) -> None:
    decisions: dict[tuple, list[tuple[str, int]]] = defaultdict(list)
    for variant, version, model, role, action, game_id, failed in con.execute(
            "select g.variant, coalesce(g.prompt_version, '(none)'), coalesce(d.model, '(unknown)'),"
            " coalesce(d.role, '(unknown)'), d.action, d.game_id, d.format_failure::int"
            " from int_decisions as d join fct_games as g using (game_id)").fetchall():
        decisions[(variant, version, model, role, action)].append((game_id, failed))
    mart = {(r["variant"], r["prompt_version"], r["model"], r["role"], r["action"]): r
            for r in rows(con, "select * from mart_format_failures")}
    assert mart.keys() == decisions.keys()
    clustered = failing = 0
    for key, group in decisions.items():
        row = mart[key]
        games = [g for g, _ in group]
        y = np.array([f for _, f in group], dtype=float)
        assert (row["n_decisions"], row["n_format_failures"], row["n_games"]) == (len(y), int(y.sum()),
                                                                                   len(set(games)))
        sd = cluster_sd(y, games) if len(set(games)) > 1 else None
        assert row["sd_by_game"] == (None if sd is None else pytest.approx(sd, rel=1e-9, abs=1e-12))
        deff = _design_effect(int(y.sum()), len(y), sd)
        assert row["design_effect"] == pytest.approx(deff, rel=1e-9)
        assert (row["wilson_low_by_game"], row["wilson_high_by_game"]) == pytest.approx(
            _wilson(y.sum() / deff, len(y) / deff), rel=1e-9, abs=1e-12)
        assert row["wilson_low_by_game"] <= row["wilson_low"] + 1e-12
        assert row["wilson_high_by_game"] >= row["wilson_high"] - 1e-12
        clustered += row["n_decisions"] > row["n_games"]
        failing += row["n_format_failures"] > 0
    # Rows whose games hold several of their decisions, with failures: the check is not vacuous.
    assert clustered >= 3 and failing >= 3
    # And some whose design effect is above 1 (the failures of a game go together in these games).
    assert sum(r["design_effect"] > 1 for r in mart.values()) >= 3


def test_reasoning_failures_by_game_are_the_cluster_robust_sandwich(con) -> None:
    tests: dict[tuple, list[tuple[str, int]]] = defaultdict(list)
    for variant, version, level, model, game_id, failed in con.execute(
            "select variant, coalesce(prompt_version, '(none)'), level, model, game_id, failed::int"
            " from int_reasoning_opportunities").fetchall():
        tests[(variant, version, level, model)].append((game_id, failed))
    mart = {(r["variant"], r["prompt_version"], r["level"], r["model"]): r
            for r in rows(con, "select * from mart_reasoning_failures")}
    assert mart.keys() == tests.keys()
    for key, group in tests.items():
        row = mart[key]
        games = [g for g, _ in group]
        y = np.array([f for _, f in group], dtype=float)
        assert (row["n_opportunities"], row["n_failures"], row["n_games"]) == (len(y), int(y.sum()),
                                                                                len(set(games)))
        if len(set(games)) > 1:
            assert row["sd_by_game"] == pytest.approx(cluster_sd(y, games), rel=1e-9, abs=1e-12)
    # The classic detectives are tested at every day's vote once they know a mafioso: several tests a game.
    assert any(r["n_opportunities"] > r["n_games"] for (variant, *_), r in mart.items() if variant == "classic")


def test_by_hand() -> None:
    """The villager model V's messages in three games: two, both broken; two, none broken; one, not broken. The
    rate 2/5; each game's residual f - rate * m: 2 - 0.8, 0 - 0.8, 0 - 0.4, squared and summed 2.24; three games:
    sd = sqrt(3/2 * 2.24) / 5. Its votes, one a game and none broken: sd 0 (every game's rate the same), and the
    Wilson interval stands. Counted as five independent messages, the Beta sd is sqrt(3 * 4 / (49 * 8)), smaller."""
    games = [
        mini_record("two-broken", models=MODELS, votes=TOWN_WIN_VOTES,
                    messages=[("Charlie", None), ("Bob", "x"), ("Charlie", None)]),
        mini_record("two-fine", models=MODELS, votes=TOWN_WIN_VOTES,
                    messages=[("Charlie", "x"), ("Alice", "y"), ("Charlie", "z")]),
        mini_record("one-fine", models=MODELS, votes=TOWN_WIN_VOTES, messages=[("Charlie", "x")]),
    ]
    c = landed(games, only=READ)
    r = one(c, "select * from mart_format_failures where model = 'V' and action = 'message'")
    assert (r["n_decisions"], r["n_format_failures"], r["n_games"]) == (5, 2, 3)
    sd = math.sqrt(1.5 * 2.24) / 5
    assert r["sd_by_game"] == pytest.approx(sd)
    # The binomial variance 0.4 * 0.6 / 5 = 0.048; the design effect 1.5 * 2.24 / 25 / 0.048 = 2.8: the Wilson
    # interval of 2 / 2.8 failures in 5 / 2.8 decisions.
    assert r["design_effect"] == pytest.approx(2.8)
    assert (r["wilson_low_by_game"], r["wilson_high_by_game"]) == pytest.approx(_wilson(2 / 2.8, 5 / 2.8))
    assert r["sd_by_game"] > r["beta_sd"] == pytest.approx(math.sqrt(3 * 4 / (49 * 8)))
    v = one(c, "select * from mart_format_failures where model = 'V' and action = 'vote'")
    assert (v["n_decisions"], v["n_format_failures"], v["n_games"], v["sd_by_game"]) == (3, 0, 3, 0)
    # No failure: the design effect cannot be estimated and is 1, the interval Wilson's [0, 56.1%] (not empty).
    assert v["design_effect"] == 1
    assert (v["wilson_low_by_game"], v["wilson_high_by_game"]) == (v["wilson_low"], v["wilson_high"])
    assert v["wilson_high"] == pytest.approx(_wilson(0, 3)[1])
    # One game: no sd by game.
    c1 = landed(games[:1], only=READ)
    assert one(c1, "select sd_by_game from mart_format_failures where model = 'V' and action = 'message'") == {
        "sd_by_game": None}




def _coverage(a: float, b: float, games: int, studies: int, rng: np.random.Generator) -> dict[str, float]:
    """Studies of `games` games, each with 2-6 decisions of the model, which fails each with a probability drawn per
    game from Beta(a, b): the share of studies whose 95% interval holds the mean a / (a + b)."""
    truth = a / (a + b)
    hits = {"by_game": 0, "wilson": 0}
    for _ in range(studies):
        m = rng.integers(2, 7, size=games)
        f = rng.binomial(m, rng.beta(a, b, size=games))
        n, k = int(m.sum()), int(f.sum())
        sd = math.sqrt(games / (games - 1) * ((f - k / n * m) ** 2).sum()) / n
        deff = _design_effect(k, n, sd)
        low, high = _wilson(k / deff, n / deff)
        w_low, w_high = _wilson(k, n)
        hits["by_game"] += low <= truth <= high
        hits["wilson"] += w_low <= truth <= w_high
    return {key: v / studies for key, v in hits.items()}


@pytest.mark.parametrize(("a", "b", "games", "wilson_between"), [
    (0.3, 2.7, 200, (0.0, 0.85)),  # failures strongly clustered (intra-game correlation 0.25), 200 games
    (0.3, 2.7, 40, (0.0, 0.85)),  # the same, 40 games
    (1.0, 9.0, 200, (0.0, 0.92)),  # mildly (0.09)
    (50.0, 450.0, 200, (0.93, 0.97)),  # hardly at all (0.002): Wilson's holds too, and the design effect stays near 1
])
def test_by_simulation_the_interval_counting_games_covers(a, b, games, wilson_between) -> None:
    """A failure rate of 0.1 with failures that go together in a game by the degree the Beta's spread sets, 2,000
    studies: the Wilson interval counting games holds the rate in 93-97% of studies (the cluster-robust variance is a
    little narrow with skewed counts and tens of games), the Wilson interval counting decisions in fewer."""
    coverage = _coverage(a, b, games, 2000, np.random.default_rng(20261130))
    print(f"Beta({a}, {b}), {games} games: coverage of 95% intervals over 2,000 studies: {coverage}")
    assert 0.93 <= coverage["by_game"] <= 0.97, coverage
    assert wilson_between[0] <= coverage["wilson"] < wilson_between[1], coverage


def test_the_failures_page_draws_the_interval_counting_games(con) -> None:
    """The bars are the Wilson interval counting games, and the tables give the design effect and that interval
    beside the one counting decisions."""
    import json
    import re

    from mafiabench.dashboards.data import Marts
    from mafiabench.dashboards.html import fmt_interval, render_page
    from mafiabench.dashboards.page_registry import Context
    from mafiabench.dashboards.pages.failures import build

    page = build(Context(marts=Marts(con), transcripts={}))
    charts = {b.key: b.spec for b in page.charts}
    for name in ("format", "reasoning"):
        spec = json.dumps(charts[name])
        assert '"field": "wilson_low_by_game"' in spec and '"field": "wilson_high_by_game"' in spec
        assert '"field": "wilson_low"' in spec  # in the tooltip, beside it
    html = render_page(page, nav=[])
    assert "design effect" in html and "95% counting games" in html
    widest = max(page.data["formats"], key=lambda r: r["design_effect"])
    assert widest["design_effect"] > 1.5
    row = re.search(r"<tr>(?:(?!</tr>).)*" + re.escape(fmt_interval(widest["wilson_low_by_game"],
                                                                     widest["wilson_high_by_game"])), html, re.S)
    assert row is not None and fmt_interval(widest["wilson_low"], widest["wilson_high"]) in row.group(0)

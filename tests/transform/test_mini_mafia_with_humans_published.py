"""The Mini-Mafia study's capability scores with a Human row come back from the published counts.

`scores_with_humans.csv` (tests/fixtures/published_mini_mafia/README.md) was made by the study's
`top_down_theoretical/scores_theoretical_with_humans.py`: the model, priors, sampler settings and normalisation of
`scores_theoretical.csv` (test_mini_mafia_published.py replicates that one), on the same 14,000 games plus three
cells of human games. How that script mapped the human games, which this test replicates as it ran:

- the human games are aggregated by the human's role, whoever the AI opponents were, and every one is counted as
  played against GPT-4.1 Mini in both other roles (its `avg_model`; "synthetic games"), so the Human adds three
  cells: (Human, GPT-4.1 Mini, GPT-4.1 Mini) as (mafioso, villager, detective), and the two rotations;
- `mini_mafia_human.db` gives per `human_role` the games and mafia wins (`winner = 'EVIL'`), and every game of
  `mini_mafia_human_old.db` is counted as a mafioso game: Human as mafioso 12 + 34 = 46 games, 8 + 12 = 20 mafia
  wins; as villager 21 games, 2 mafia wins; as detective 13 games, 5 mafia wins;
- 9 of the old database's games are 9 of the new one's (same timestamps, outcomes and actions; 7 of them mafia
  wins): the script counts them twice, and so does this test (46 games, 20 wins), because that is what produced
  the published row. The distinct mafioso games are 37, 13 mafia wins: with them the Human's deceive estimate falls
  by about 0.4 (one posterior sd) and the published table is no longer reproduced
  (`test_the_distinct_human_games_do_not_give_the_published_row`).

The normalisation is the same in both of the study's scripts and in `fit_latent_nuts`: each draw's a and b shifted
by that draw's mean(a) over all models (the Human included), then a and b multiplied and c divided by one scalar,
the mean over models of the posterior-mean c; so `fit_latent_nuts`'s estimates are compared as they are. The Human
enters both means, which is why every LLM row differs from `scores_theoretical.csv` (its c of about 3 raises the
scale: all detect estimates about 20% lower, deceive and disclose spread wider), not a change of substance.
"""

from __future__ import annotations

import math

import pytest

from mafiabench.transform.models import latent
from mafiabench.transform.models.latent import NutsFit, fit_latent_nuts
from support.published_mini_mafia import GAMES_PER_CELL, published_cells, published_ess, read

pytestmark = pytest.mark.slow  # two NUTS fits of 143 cells: about 30 s on two cores, JAX's start included

HUMAN = "Human"  # the published row's name (the script's display name of 'human')
AVG_MODEL = "GPT-4.1 Mini"  # win_counts.csv's name of the script's avg_model 'gpt-4.1-mini'
# (mafioso, villager, detective, games, mafia wins), as the script counted them (double count included).
HUMAN_CELLS = [(HUMAN, AVG_MODEL, AVG_MODEL, 46, 20), (AVG_MODEL, HUMAN, AVG_MODEL, 21, 2),
               (AVG_MODEL, AVG_MODEL, HUMAN, 13, 5)]
DISTINCT_HUMAN_MAFIOSO = (HUMAN, AVG_MODEL, AVG_MODEL, 37, 13)  # the 9 duplicated games (7 mafia wins) once
# The module's default 4 chains x 1,000 draws: the design places every parameter, so NUTS samples in the gauge
# coordinates (`_sampler`), whose largest split R-hat here is 1.0009-1.0012 (seeds 42, 0, 1; smallest bulk ESS
# 2,771-3,365, no divergence). The reference coordinates needed 2,000 draws per chain (R-hat 1.010-1.011 at 1,000).
DRAWS = latent.DRAWS
COLUMNS = (("m", "Deceive"), ("v", "Detect"), ("d", "Disclose"))
PARAMETERS = {"m": "deceive", "v": "detect", "d": "disclose"}


def llm_cells() -> list[tuple[str, str, str, int, int]]:
    return [(m, v, d, GAMES_PER_CELL, w) for (m, v, d), (w, *_) in published_cells().items()]


def theirs_ess() -> float:
    """The study's effective sample size for this run is not published: its diagnostics of the same sampler on the
    140 cells (smallest bulk ESS of the raw a, b, c: 331 of 2 x 2,000 draws) stand for it. The run's ESS is at most
    4,000, which would narrow the tolerance below: our estimates are within it too (largest deviation 1.7 combined
    Monte Carlo se on 4,000)."""
    return published_ess()


def tolerances(fit: NutsFit, p: str, i: int) -> tuple[float, float]:
    """(Monte Carlo se of the difference of two posterior means, relative se of the ratio of two posterior sds),
    ours from our ESS, theirs from `theirs_ess`, as test_mini_mafia_published.py computes them."""
    ess, theirs = float(fit.ess[p][i]), theirs_ess()
    return (float(fit.sd[p][i]) * math.sqrt(1 / ess + 1 / theirs),
            math.sqrt(1 / (2 * ess) + 1 / (2 * theirs)))


def outside(fit: NutsFit, table: str) -> list[tuple[str, str, float, float]]:
    """(parameter, model, ours, published) for each posterior mean of `table` more than 4 Monte Carlo se from ours."""
    published = {r["Model"]: r for r in read(table)}
    far = []
    for p, column in COLUMNS:
        for i, model in enumerate(fit.models[p]):
            if model in published:
                theirs = float(published[model][column])
                if abs(float(fit.estimate[p][i]) - theirs) > 4 * tolerances(fit, p, i)[0]:
                    far.append((p, model, float(fit.estimate[p][i]), theirs))
    return far


@pytest.fixture(scope="module")
def fit() -> NutsFit:
    return fit_latent_nuts(llm_cells() + HUMAN_CELLS)


def test_the_cells_are_the_scripts() -> None:
    cells = llm_cells()
    assert len(cells) == 140 and sum(c[3] for c in cells) == 14_000
    assert AVG_MODEL in {c[0] for c in cells} and HUMAN not in {x for c in cells for x in c[:3]}
    assert {r["Model"] for r in read("scores_with_humans.csv")} == {c[0] for c in cells} | {HUMAN}
    assert sum(c[3] for c in HUMAN_CELLS) == 80 and sum(c[4] for c in HUMAN_CELLS) == 27


def test_every_estimate_is_the_published_one_within_monte_carlo_error(fit: NutsFit) -> None:
    """scores_with_humans.csv, all 11 rows: each posterior mean within 4 Monte Carlo se of ours (ours and theirs
    combined) and each posterior sd within 4 relative se of ours; our sampling converged, every model (the Human
    included) has all three parameters, and the normalisation holds over the 11: mean(m) = 0, mean(v) = 1."""
    assert (fit.n_cells, fit.n_games, fit.chains, fit.n_draws) == (143, 14_080, 4, DRAWS)
    assert fit.coordinates == "gauge" and fit.divergences == 0
    assert fit.converged, (fit.max_r_hat, fit.min_ess)
    published = {r["Model"]: r for r in read("scores_with_humans.csv")}
    for p, column in COLUMNS:
        assert sorted(fit.models[p]) == sorted(published), p
        for i, model in enumerate(fit.models[p]):
            ours, sd = float(fit.estimate[p][i]), float(fit.sd[p][i])
            theirs, theirs_sd = float(published[model][column]), float(published[model][f"{column}_Error"])
            mc_se, sd_rel = tolerances(fit, p, i)
            assert abs(ours - theirs) <= 4 * mc_se, (PARAMETERS[p], model, ours, theirs, mc_se)
            assert abs(sd / theirs_sd - 1) <= 4 * sd_rel, (PARAMETERS[p], model, sd, theirs_sd, sd_rel)
    assert sum(fit.estimate["m"]) == pytest.approx(0, abs=1e-9)
    assert sum(fit.estimate["v"]) == pytest.approx(11, abs=1e-9)
    assert outside(fit, "scores_with_humans.csv") == []


def test_the_llm_rows_are_not_the_ones_without_humans(fit: NutsFit) -> None:
    """The tolerance tells the two published tables apart: the 140-cell estimates (scores_theoretical.csv, which a
    fit without the human cells reproduces) are outside it for nearly every LLM parameter, so a fit that left the
    human cells out, or normalised over the 10 LLMs only, fails the test above."""
    far = outside(fit, "scores_theoretical.csv")
    assert len(far) >= 25, far  # of 30
    assert {(p, m) for p, m, *_ in far} >= {("v", m) for m in fit.models["v"] if m != HUMAN}  # all detect, ~20% lower


def test_the_distinct_human_games_do_not_give_the_published_row(fit: NutsFit) -> None:
    """With the 37 distinct mafioso games (13 mafia wins) in place of the script's 46 (20), the Human's deceive
    falls by about 0.4 (from 0.33 to -0.07: a mafia win rate of 13/37 = 35% against GPT-4.1 Mini instead of 20/46 =
    43%), every LLM's deceive rises by about 0.04 (the mean(m) = 0 shift: 0.4 / 11), and the published Human row is
    far outside the Monte Carlo error: the published table is the double-counted data's."""
    distinct = fit_latent_nuts([*llm_cells(), DISTINCT_HUMAN_MAFIOSO, *HUMAN_CELLS[1:]])
    assert distinct.converged, (distinct.max_r_hat, distinct.min_ess)
    before = dict(zip(fit.models["m"], fit.estimate["m"], strict=True))
    after = dict(zip(distinct.models["m"], distinct.estimate["m"], strict=True))
    assert -0.5 < after[HUMAN] - before[HUMAN] < -0.3, (before[HUMAN], after[HUMAN])
    assert all(0.02 < after[m] - before[m] < 0.06 for m in before if m != HUMAN), (before, after)
    far = {(p, m) for p, m, *_ in outside(distinct, "scores_with_humans.csv")}
    assert ("m", HUMAN) in far and len({m for p, m in far if p == "m"}) >= 6, far

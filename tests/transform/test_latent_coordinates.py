"""The latent model's NUTS fit samples the reference's posterior whichever coordinates it moves in
(`latent._sampler`): the `gauge` coordinates (shift, log scale and the shape the data set) give the reference's
prior back with no games, the same posterior as the reference's own coordinates on a design with games, and are
chosen on each part of the design (`latent.components`, sampled apart) that places all its own parameters."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from mafiabench.transform.models.latent import (
    CHAINS,
    PRIOR_SD,
    TARGET_ACCEPT,
    _jax,
    _sample,
    _sampler,
    components,
    fit_latent_nuts,
)

pytestmark = pytest.mark.slow  # NUTS fits: a few seconds each once JAX has compiled the sampler

Cell = tuple[str, str, str, int, int]


def full_design(n: int) -> list[Cell]:
    """Three models in every role, n games a cell; the mafia's wins their expected count under logit p = c_k (a_i -
    b_j) with a = (0.8, 0, -0.6), b = (0.3, -0.2, 0), c = (1.5, 1, 0.6)."""
    a, b, c = (0.8, 0.0, -0.6), (0.3, -0.2, 0.0), (1.5, 1.0, 0.6)
    out = []
    for i, k, j in itertools.product(range(3), repeat=3):
        p = 1 / (1 + math.exp(-c[k] * (a[i] - b[j])))
        out.append((f"m{i}", f"m{k}", f"m{j}", n, round(n * p)))
    return out


def prior_draws(n_mafiosos: int, n_detectives: int, n_villagers: int, padded: int) -> dict[str, np.ndarray]:
    """The gauge sampler run with no games (every cell empty): what it draws of a, b, c for each role's models."""
    jax = _jax()
    import jax.numpy as jnp

    real = np.zeros((3, padded))
    for row, size in enumerate((n_mafiosos, n_detectives, n_villagers)):
        real[row, :size] = 1.0
    mcmc = _sampler(padded, 16, CHAINS, 1000, 5000, TARGET_ACCEPT, "gauge")
    zeros = jnp.zeros(16, dtype=jnp.int64)
    mcmc.run(jax.random.PRNGKey(7), zeros, zeros, zeros, jnp.zeros(16), jnp.zeros(16), jnp.asarray(real))
    samples = mcmc.get_samples()
    return {"a": np.asarray(samples["a"])[:, :n_mafiosos], "b": np.asarray(samples["b"])[:, :n_detectives],
            "c": np.asarray(samples["c"])[:, :n_villagers]}


def test_with_no_games_the_gauge_coordinates_give_the_reference_prior() -> None:
    """a, b, c iid N(0, 2), conditioned on sum(c) > 0: every a and b has sd 2, and mean(c) over the 4 villagers,
    N(0, 2 / sqrt(4)) conditioned positive, has the half-normal's mean 1 * sqrt(2 / pi) = 0.798 and sd
    sqrt(1 - 2 / pi) = 0.603. Roles of different sizes (3 mafiosos, 2 detectives, 4 villagers, padded to 4) so
    that a wrong Jacobian exponent (n_c - n_a - n_b + 1) shows (checked: one power of s too many gave mean(c) 1.25;
    one too few a mean of a of 0.17, and the next test's sds apart)."""
    draws = prior_draws(3, 2, 4, 4)
    # 20,000 draws, correlated: 5% on a mean and 4% on an sd is about 3 to 4 Monte Carlo se at the ESS seen (2,000+).
    for kind in ("a", "b"):
        assert np.abs(draws[kind].mean(axis=0)).max() < 0.15, (kind, draws[kind].mean(axis=0))
        assert np.abs(draws[kind].std(axis=0) / PRIOR_SD - 1).max() < 0.05, (kind, draws[kind].std(axis=0))
    mean_c = draws["c"].mean(axis=1)
    assert (mean_c > 0).all()
    # With no games NUTS in these coordinates reaches small s a little short (a funnel: every a - t scales as 1 / s):
    # mean(c) averaged 0.819 over seeds 7-17 against 0.798 (the reference coordinates: 0.802 over seeds 10-15), about
    # 2.5%; 0.838 at this seed. Where games set s (the next test) the two agree; a part whose scale only its prior
    # sets is reported not identified. 6% still tells a wrong Jacobian (one power of s too many: 1.25).
    assert mean_c.mean() == pytest.approx(math.sqrt(2 / math.pi), rel=0.06)
    assert mean_c.std() == pytest.approx(math.sqrt(1 - 2 / math.pi), rel=0.05)
    # Each c: its deviation from mean(c) (variance 4 (1 - 1/4)) plus mean(c), independent of it.
    sd_c = math.sqrt(PRIOR_SD**2 * (1 - 1 / 4) + (PRIOR_SD**2 / 4) * (1 - 2 / math.pi))
    assert np.abs(draws["c"].std(axis=0) / sd_c - 1).max() < 0.05, draws["c"].std(axis=0)


def test_the_two_coordinates_give_the_same_posterior() -> None:
    """On a full design of 27 cells of 400 games, every normalised posterior mean within 4 Monte Carlo se of the
    other coordinates' (both ESSs combined) and every posterior sd within 4 relative se; the gauge coordinates
    without a divergence and with at least twice the smallest ESS."""
    cells = full_design(400)
    settings = {"chains": CHAINS, "draws": 1000, "seed": 3}
    # The reference coordinates at a smaller step and a longer warmup, so that their fit is a reference: at the fit's
    # own settings (warmup 500, target_accept 0.95) they diverged 210 times at this seed on one AMD EPYC (min ESS 16,
    # a mean 4.6 of its Monte Carlo se off) and not on another, as XLA's floating point differs by CPU. At 0.99 and
    # 1,000 warm-up draws, seeds 3-5 there: no divergence, every mean within 1.1 se of the gauge's (the gauge at
    # 1,000 too in that check; here it keeps the fit's 500).
    reference = _sample(cells, **settings, warmup=1000, target_accept=0.99, coordinates="reference")
    gauge = _sample(cells, **settings, warmup=500, target_accept=TARGET_ACCEPT, coordinates="gauge")
    assert (reference.coordinates, gauge.coordinates) == ("reference", "gauge")
    assert reference.divergences == 0, reference.divergences
    for p in ("m", "d", "v"):
        assert reference.models[p] == gauge.models[p] == ["m0", "m1", "m2"]
        for i in range(3):
            ess_r, ess_g = float(reference.ess[p][i]), float(gauge.ess[p][i])
            sd = float(reference.sd[p][i])
            mc_se = sd * math.sqrt(1 / ess_r + 1 / ess_g)
            assert abs(float(gauge.estimate[p][i]) - float(reference.estimate[p][i])) <= 4 * mc_se, (p, i)
            sd_rel = math.sqrt(1 / (2 * ess_r) + 1 / (2 * ess_g))
            assert abs(float(gauge.sd[p][i]) / sd - 1) <= 4 * sd_rel, (p, i, float(gauge.sd[p][i]), sd)
    assert gauge.divergences == 0 and gauge.converged
    assert gauge.min_ess >= 2 * reference.min_ess, (gauge.min_ess, reference.min_ess)
    assert gauge.mean_steps < reference.mean_steps, (gauge.mean_steps, reference.mean_steps)  # cheaper a draw


def test_the_fit_moves_in_gauge_coordinates_on_each_part_that_places_its_parameters() -> None:
    """The full design: one part, gauge. With a policy pair that meets no model beside it (the demo's baselines):
    two parts, each placing its own parameters against its own anchors, so gauge on both; the pair's are still
    reported as undetermined against the models. With a person who played one cell twice against the models
    (X, Y as mafioso and villager, m0 as detective): one part whose X and Y the data leave to the priors, so the
    reference's coordinates (`_sampler`)."""
    cells = full_design(40)
    assert fit_latent_nuts(cells).coordinates == "gauge"
    apart = [("policy/votes", "policy/random", "policy/informed", 60, 39),
             ("policy/random", "policy/random", "policy/informed", 60, 30)]
    fit = fit_latent_nuts(cells + apart)
    assert fit.coordinates == "gauge + gauge" and fit.converged, (fit.max_r_hat, fit.min_ess)
    assert fit.undetermined["m"] == ["policy/random", "policy/votes"]
    twice = [("X", "Y", "m0", 50, 20), ("X", "Y", "m0", 40, 10)]
    fit = fit_latent_nuts(cells + twice)
    assert fit.coordinates == "reference"
    assert (fit.undetermined["m"], fit.undetermined["v"]) == (["X"], ["Y"])


@pytest.mark.parametrize(("cells", "parts"), [
    ([], []),
    ([("A", "A", "A", 1, 0)], [["A"]]),
    ([("A", "B", "C", 1, 0), ("D", "E", "F", 2, 0)], [["D"], ["A"]]),  # apart, the most games first
    ([("A", "B", "C", 1, 0), ("D", "B", "F", 1, 0)], [["A", "D"]]),  # B the villager in both
    ([("A", "B", "C", 1, 0), ("B", "A", "C", 1, 0), ("D", "E", "F", 1, 0)], [["A", "B"], ["D"]]),  # C detects both
    ([("A", "B", "C", 1, 0), ("B", "C", "A", 1, 0)], [["A"], ["B"]]),  # a name in another role is another parameter
])
def test_components_by_hand(cells: list[Cell], parts: list[list[str]]) -> None:
    assert [[c[0] for c in part] for part in components(cells)] == parts

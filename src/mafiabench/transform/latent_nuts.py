"""The top-down latent model as the Mini-Mafia reference fits it now, by full Bayesian sampling (NumPyro NUTS).

The reference (`mini-mafia-benchmark/analysis/top_down_theoretical/scores_theoretical_model.py` of
bastoscostadavi/llm-mafia-game, commit "added shift symmetry and fixed E[m]=0"): one deceive (a), disclose (b) and
detect (c) parameter per model (every model of the published design plays every role; here a model has the
parameters of the roles it played, see `fit_latent_nuts`), priors
a, b, c ~ Normal(0, 2), c allowed negative, the sign flip excluded by requiring sum(c) > 0, and

    mafia wins in a (mafioso i, villager k, detective j) cell ~ Binomial(n, logit p = c_k (a_i - b_j)).

Its published estimates are then normalised as the reference does: each draw's a and b are shifted by that draw's
mean(a) (mean(m) = 0), and all draws are scaled by lambda = mean over models of the posterior mean of c (m = a
lambda, d = b lambda, v = c / lambda, so mean(v) = 1). The estimate is the posterior mean, its uncertainty the
posterior sd (`estimate`, `se`: the published `Deceive`, `Deceive_Error`, ... columns), with a central 95% credible
interval beside them, and per parameter the split R-hat and effective sample size of its normalised draws
(`numpyro.diagnostics`). A fit whose largest R-hat exceeds `MAX_R_HAT` or smallest ESS is under `MIN_ESS` is flagged
as not converged, never silently trusted.

NUTS adapts a dense mass matrix (the shift a, b -> a + t, b + t is a straight ridge of the posterior it removes:
the bulk ESS doubles against a diagonal one at the same cost). The likelihood is written as a factor, sum of
w eta - n log(1 + e^eta): the binomial's log-normaliser is a constant, so the posterior is the reference's. Cells and
models are padded to powers of two (empty cells, prior-only models left out of every sum and mean) so that one
compiled sampler serves every build of similar size in a process; JAX runs on the CPU in double precision (a cell of
a million games would overflow float32's resolution).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

PRIOR_SD = 2.0
CHAINS = 4
WARMUP = 500
DRAWS = 1000  # x 4 chains: a bulk ESS of 500-650 on the published design (MIN_ESS below)
TARGET_ACCEPT = 0.95  # the reference's
SEED = 42  # the reference's random_seed: a build's estimates are reproducible
MAX_R_HAT = 1.01  # Vehtari et al. (2021): split R-hat below 1.01 ...
MIN_ESS = 400  # ... and a bulk effective sample size of at least 100 per chain (4 chains)


@dataclass
class NutsFit:
    """Normalised posterior summaries of m (deceive), d (disclose) and v (detect): for each, one entry per model
    that played the role (mafioso, detective, villager), in the order of `models[parameter]` (sorted)."""

    models: dict[str, list[Any]]
    estimate: dict[str, np.ndarray]
    sd: dict[str, np.ndarray]
    ci_low: dict[str, np.ndarray]
    ci_high: dict[str, np.ndarray]
    r_hat: dict[str, np.ndarray]
    ess: dict[str, np.ndarray]
    draws: dict[str, np.ndarray]  # (chains, draws, models) normalised draws
    scale: float  # lambda: the posterior mean of mean(c) the draws were divided by
    divergences: int
    chains: int
    n_draws: int
    n_cells: int
    n_games: int

    @property
    def max_r_hat(self) -> float:
        return float(max(np.nanmax(x) for x in self.r_hat.values()))

    @property
    def min_ess(self) -> float:
        return float(min(np.nanmin(x) for x in self.ess.values()))

    @property
    def converged(self) -> bool:
        return self.max_r_hat <= MAX_R_HAT and self.min_ess >= MIN_ESS


_SAMPLERS: dict[tuple[int, int, int, int, int, float], Any] = {}


def _jax() -> Any:
    """Import JAX on the CPU in double precision, with one host device per chain so the chains run in parallel."""
    if "jax" not in sys.modules:  # the device count and platform are read once, when JAX starts
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_force_host_platform_device_count" not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={CHAINS}".strip()
        os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


def _pad(size: int, floor: int) -> int:
    return max(floor, 1 << (max(size, 1) - 1).bit_length())


def _sampler(n_models: int, n_cells: int, chains: int, warmup: int, draws: int, target_accept: float) -> Any:
    key = (n_models, n_cells, chains, warmup, draws, target_accept)
    if key not in _SAMPLERS:
        jax = _jax()
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist
        from numpyro.infer import MCMC, NUTS, init_to_value

        def model(mafioso: Any, villager: Any, detective: Any, n: Any, w: Any, real_villager: Any) -> None:
            a = numpyro.sample("a", dist.Normal(0.0, PRIOR_SD).expand([n_models]).to_event(1))
            b = numpyro.sample("b", dist.Normal(0.0, PRIOR_SD).expand([n_models]).to_event(1))
            c = numpyro.sample("c", dist.Normal(0.0, PRIOR_SD).expand([n_models]).to_event(1))
            numpyro.factor("c_sum_positive", jnp.where(jnp.sum(c * real_villager) > 0, 0.0, -jnp.inf))
            eta = c[villager] * (a[mafioso] - b[detective])
            numpyro.factor("mafia_wins", jnp.sum(w * eta - n * jax.nn.softplus(eta)))

        start = {"a": jnp.zeros(n_models), "b": jnp.zeros(n_models), "c": jnp.ones(n_models)}
        kernel = NUTS(model, target_accept_prob=target_accept, dense_mass=True,
                      init_strategy=init_to_value(values=start))
        method = "parallel" if jax.local_device_count() >= chains else "sequential"
        _SAMPLERS[key] = MCMC(kernel, num_warmup=warmup, num_samples=draws, num_chains=chains, chain_method=method,
                              progress_bar=False, jit_model_args=True)
    return _SAMPLERS[key]


def fit_latent_nuts(
    cells: list[tuple[str, str, str, int, int]],
    *,
    chains: int | None = None,
    warmup: int | None = None,
    draws: int | None = None,
    target_accept: float | None = None,
    seed: int = SEED,
) -> NutsFit:
    """Sample the reference's model on (mafioso, villager, detective, games, mafia wins) cells; see the module.
    Settings left out are the module's (`CHAINS`, `WARMUP`, `DRAWS`, `TARGET_ACCEPT`), read at each call."""
    chains = chains or CHAINS
    warmup = warmup or WARMUP
    draws = draws or DRAWS
    target_accept = target_accept or TARGET_ACCEPT
    cells = [c for c in cells if c[3] > 0]
    if not cells:
        raise ValueError("no games to fit")
    # Each role's models get that role's parameter (a model that never played a role has none): on the published
    # design, where every model plays every role, this is the reference's model exactly; on a partial one a
    # prior-only parameter would take part in sum(c) > 0, mean(a) and mean(c), and let the sign flip back in.
    roles = {k: sorted({c[pos] for c in cells}) for k, pos in (("a", 0), ("c", 1), ("b", 2))}
    index = {k: {name: i for i, name in enumerate(names)} for k, names in roles.items()}
    n_cells = len(cells)
    p_models, p_cells = _pad(max(len(x) for x in roles.values()), 4), _pad(n_cells, 16)
    columns = np.zeros((5, p_cells), dtype=np.int64)
    for i, (m, v, d, n, w) in enumerate(cells):
        columns[:, i] = (index["a"][m], index["c"][v], index["b"][d], n, w)
    real_villager = np.zeros(p_models)
    real_villager[: len(roles["c"])] = 1.0
    jax = _jax()
    import jax.numpy as jnp
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

    mcmc = _sampler(p_models, p_cells, chains, warmup, draws, target_accept)
    mcmc.run(jax.random.PRNGKey(seed), *(jnp.asarray(x) for x in columns[:3]),
             jnp.asarray(columns[3], dtype=float), jnp.asarray(columns[4], dtype=float),
             jnp.asarray(real_villager), extra_fields=("diverging",))
    raw = {k: np.asarray(x)[..., : len(roles[k])] for k, x in mcmc.get_samples(group_by_chain=True).items()}
    divergences = int(np.asarray(mcmc.get_extra_fields(group_by_chain=True)["diverging"]).sum())
    # The reference's gauge: each draw shifted by its mean(a); every draw scaled by the posterior mean of mean(c).
    shift = raw["a"].mean(axis=-1, keepdims=True)
    scale = float(raw["c"].mean(axis=(0, 1)).mean())
    normalised = {"m": (raw["a"] - shift) * scale, "d": (raw["b"] - shift) * scale, "v": raw["c"] / scale}
    names = {"m": roles["a"], "d": roles["b"], "v": roles["c"]}
    flat = {k: x.reshape(-1, x.shape[-1]) for k, x in normalised.items()}
    return NutsFit(
        models=names,
        estimate={k: x.mean(axis=0) for k, x in flat.items()},
        sd={k: x.std(axis=0) for k, x in flat.items()},
        ci_low={k: np.quantile(x, 0.025, axis=0) for k, x in flat.items()},
        ci_high={k: np.quantile(x, 0.975, axis=0) for k, x in flat.items()},
        r_hat={k: np.asarray(split_gelman_rubin(x)) for k, x in normalised.items()},
        ess={k: np.asarray(effective_sample_size(x)) for k, x in normalised.items()},
        draws=normalised,
        scale=scale,
        divergences=divergences,
        chains=chains,
        n_draws=draws,
        n_cells=n_cells,
        n_games=int(sum(c[3] for c in cells)),
    )

"""The listing-order check's binomial test (`warehouse.listing_leaks.binom_test_p`) is scipy.stats.binomtest's two-sided
p-value, the same float, without importing scipy.stats: on the support's edges, at k = n p, on both sides of the mode
and at the sizes a million games reach; and a build's models import neither scipy.stats nor scipy.optimize until
something is fitted or tested that needs them (0.3 s of every build: issue 37)."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import binomtest

from mafiabench.warehouse.listing_leaks import binom_test_p

EDGES = [(0, 10, 0.25), (10, 10, 0.25), (5, 20, 0.25), (14, 14, 0.25), (1, 1, 0.5), (0, 1, 0.5), (3, 12, 0.25),
         (0, 10, 0.0), (10, 10, 1.0), (3, 10, 0.0), (250_000, 1_000_000, 0.25), (252_200, 1_000_000, 0.25)]


def _cases(seed: int, n_cases: int) -> list[tuple[int, int, float]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_cases):
        n = int(rng.choice([10, 11, 20, 37, 100, 1000, 12_345, 1_000_000]))
        p = float(rng.choice([0.25, 1 / 3, 0.2, 0.5, rng.random()]))
        sd = math.sqrt(n * p * (1 - p)) * float(rng.choice([0.5, 3.0, 10.0]))
        out.append((int(np.clip(round(rng.normal(p * n, sd)), 0, n)), n, p))
    return out


@pytest.mark.parametrize(("k", "n", "p"), EDGES + _cases(0, 400))
def test_the_p_value_is_scipys(k: int, n: int, p: float) -> None:
    assert binom_test_p(k, n, p) == float(binomtest(k, n, p).pvalue)


def test_the_models_import_no_scipy_stats_or_optimize() -> None:
    code = """
import importlib, sys
from mafiabench.transform.models import PYTHON_MODELS
for step in PYTHON_MODELS:
    importlib.import_module("mafiabench.transform.models." + step.function.rpartition(".")[0])
from mafiabench.warehouse.listing_leaks import binom_test_p
binom_test_p(3, 12, 0.25)
print(sorted(m for m in ("scipy.stats", "scipy.optimize", "scipy.linalg") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

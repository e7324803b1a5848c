"""The latent model's NUTS fit is not repeated (issue 37 item 1): a fit is keyed by its input rows, sampler settings,
seed and code, and a second build with the same key reads the first's fit, byte for byte, without sampling; any
change to the rows or settings samples afresh. JAX keeps its compiled sampler on disk between processes."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from mafiabench.transform.models import latent

CELLS = [("a", "a", "b", 20, 12), ("a", "b", "a", 20, 9), ("b", "a", "b", 20, 11), ("b", "b", "a", 20, 8)]
SMALL = {"chains": 2, "warmup": 60, "draws": 60, "seed": 7}


def test_a_second_fit_of_the_same_rows_is_read_not_sampled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAFIABENCH_CACHE_DIR", str(tmp_path))
    first = latent.fit_latent_nuts(CELLS, **SMALL)
    assert len(list((tmp_path / "latent-fits").glob("*.pickle"))) == 1

    def no_sampling(*args: object, **kwargs: object) -> None:
        raise AssertionError("sampled again although the rows, settings and code are unchanged")

    monkeypatch.setattr(latent, "_sample", no_sampling)
    again = latent.fit_latent_nuts(list(CELLS), **SMALL)
    assert pickle.dumps(again) == pickle.dumps(first)  # the same bytes as the fresh fit
    for parameter in ("m", "d", "v"):
        np.testing.assert_array_equal(again.draws[parameter], first.draws[parameter])


@pytest.mark.parametrize(
    ("cells", "settings"),
    [
        ([*CELLS[:-1], ("b", "b", "a", 20, 9)], SMALL),  # one more mafia win in one cell
        (CELLS, {**SMALL, "seed": 8}),
        (CELLS, {**SMALL, "draws": 61}),
    ],
    ids=["a-count", "the-seed", "the-draws"],
)
def test_any_change_to_rows_or_settings_changes_the_key(cells: list, settings: dict) -> None:
    assert latent.fit_cache_key(cells, **settings) != latent.fit_cache_key(CELLS, **SMALL)


def test_the_key_holds_the_code_and_the_libraries() -> None:
    code = latent._fit_code_key()
    assert set(code) == {"module", "jax", "jaxlib", "numpyro", "numpy"} and len(code["module"]) == 64


def test_a_broken_cache_file_is_refit_not_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAFIABENCH_CACHE_DIR", str(tmp_path))
    key = latent.fit_cache_key(CELLS, **{k: v for k, v in SMALL.items()}, target_accept=latent.TARGET_ACCEPT)
    (tmp_path / "latent-fits").mkdir()
    (tmp_path / "latent-fits" / f"{key}.pickle").write_bytes(b"half a fit")
    assert latent._cached_fit(key) is None


def test_other_counts_of_the_same_shape_compile_nothing_new(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scheduled study's next build fits new counts in cells of the same padded shape: its sampler must come from
    JAX's compilation cache, not from XLA again (NumPyro's own parallel chains made the counts constants of the
    program: a new program, 8 s of compiling on 50,000 LLM-shaped games, every build; latent._parallel_chains).
    Counted by JAX's own events: a compile request the cache did not answer is a compile."""
    monkeypatch.setattr(latent, "_cached_fit", lambda key: None)  # sampled, whatever an earlier run kept
    jax = latent._jax()
    events: list[str] = []
    jax.monitoring.register_event_listener(lambda name, **kwargs: events.append(name))
    latent.fit_latent_nuts(CELLS, **{**SMALL, "seed": 11})  # the sampler of this shape compiled, or read
    for bump in (1, 2):
        events.clear()
        other = [(m, v, d, n + bump, w + bump) for m, v, d, n, w in CELLS]
        fit = latent.fit_latent_nuts(other, **{**SMALL, "seed": 11})
        requests = events.count("/jax/compilation_cache/compile_requests_use_cache")
        hits = events.count("/jax/compilation_cache/cache_hits")
        assert requests > 0 and requests == hits, (bump, requests, hits)
        assert fit.n_games == sum(n for *_, n, _ in other)

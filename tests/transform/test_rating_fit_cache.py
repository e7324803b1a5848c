"""The leaderboard's fits are not repeated (issue 37 item 1): a study's rating rows are keyed by its line-up counts,
the settings and the code, and a second build of the same games reads the first's rows, byte for byte, without
fitting; a changed count changes the key, and a broken cache file is refit."""

from __future__ import annotations

import pickle
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from mafiabench.transform.models import ratings
from support.rating_warehouse import warehouse

GAMES = [
    {"study": "s", "id": f"g{i}", "mafia": [("mafioso", "A" if i % 3 else "B")],
     "town": [("detective", "C" if i % 2 else "A"), ("villager", "B"), ("villager", "C")], "mafia_won": i % 5 < 2}
    for i in range(60)
]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MAFIABENCH_CACHE_DIR", str(tmp_path))
    return tmp_path / "rating-fits"


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record each study the ratings fit (the real fit still runs)."""
    fitted: list[str] = []
    real = ratings.study_ratings

    def counting(study: str, *args: object, **kwargs: object) -> object:
        fitted.append(study)
        return real(study, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ratings, "study_ratings", counting)
    return fitted


def test_a_second_build_of_the_same_games_reads_the_fits(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = ratings.rating_tables(warehouse(GAMES, variant="mini-mafia"))
    assert len(list(cache.glob("*.pickle"))) == 1

    def no_fit(*args: object, **kwargs: object) -> None:
        raise AssertionError("fitted again although the line-up counts, settings and code are unchanged")

    monkeypatch.setattr(ratings, "study_ratings", no_fit)
    again = ratings.rating_tables(warehouse(GAMES, variant="mini-mafia"))
    for name, frame in first.items():
        assert_frame_equal(again[name], frame, check_exact=True)
        assert pickle.dumps(again[name].to_dicts()) == pickle.dumps(frame.to_dicts())


def test_a_changed_count_changes_the_key() -> None:
    counts = ratings.game_counts(warehouse(GAMES)).line_ups
    code = ratings._fit_code_key()
    one_more_win = counts.with_columns(wins=pl.col("wins") + (pl.int_range(pl.len()) == 0).cast(pl.Int64))
    assert ratings.rating_fit_key("s", counts, code) == ratings.rating_fit_key("s", counts.clone(), code)
    assert ratings.rating_fit_key("s", one_more_win, code) != ratings.rating_fit_key("s", counts, code)
    assert ratings.rating_fit_key("t", counts, code) != ratings.rating_fit_key("s", counts, code)
    assert ratings.rating_fit_key("s", counts, {**code, "ratings": "0" * 64}) != ratings.rating_fit_key("s", counts,
                                                                                                        code)


def test_a_broken_cache_file_is_refit(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = ratings.rating_tables(warehouse(GAMES))
    (path,) = cache.glob("*.pickle")
    path.write_bytes(b"half a fit")
    fitted = _counted(monkeypatch)
    again = ratings.rating_tables(warehouse(GAMES))
    assert fitted == ["s"]
    assert_frame_equal(again["mart_ratings"], first["mart_ratings"], check_exact=True)
    assert pickle.loads(path.read_bytes())[0] == first["mart_ratings"].to_dicts()  # written whole again


def test_a_given_baseline_is_never_cached(cache: Path) -> None:
    ratings.rating_tables(warehouse(GAMES), latent=lambda data: None)
    assert not cache.exists() or not list(cache.glob("*.pickle"))

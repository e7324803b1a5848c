"""The `[detector]` section of an experiment file: which detector reads which games.

    [detector]
    models = ["openai/gpt-4.1"]          # provider/model, or policy/most-voted, policy/random (offline)
    prompt_version = "v1"                # a shipped prompt (detect/prompts/), or:
    # prompt_file = "my_detector.txt"    # your own, relative to the experiment file ($players $k $cut $transcript)
    temperature = 0.0                    # recorded with every detection (the reference: 0)
    simulated = true                     # this experiment's own finished games
    imported = ["ibraheem2022-human"]    # and/or imported games of these sources (mafiabench import ...)
    # imported_games = "human_games.txt" # pin exactly these imported games (ids, one a line; a # comment says why),
                                         # valid or not: reproduces a published game set whatever the rules decide

Validated before anything runs; `mafiabench run` detects after landing the games, `mafiabench detect` on its own.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from mafiabench.detect.detection_runs import DetectorSpec, load_game_list
from mafiabench.detect.detectors import (
    DEFAULT_PROMPT_VERSION,
    POLICIES,
    load_detector_prompt,
    load_detector_prompt_file,
)
from mafiabench.errors import as_field_error

SIMULATION = "simulation"


class DetectorSection(BaseModel):
    """What to detect on and with what; `spec(experiment)` turns it into the step's `DetectorSpec`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    models: tuple[str, ...] = Field(
        min_length=1, description="Detectors: provider/model (an LLM) or policy/most-voted, policy/random (offline)."
    )
    prompt_version: str = Field(DEFAULT_PROMPT_VERSION, description="Shipped detector prompt (detect/prompts/).")
    prompt_file: str | None = Field(
        None, description="Your own detector prompt file (relative to the experiment file); overrides prompt_version."
    )
    temperature: float | None = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature (reference: 0).")
    max_tokens: int | None = Field(60, ge=1, description="Token cap of a detector answer.")
    simulated: StrictBool = Field(True, description="Detect on this experiment's own finished games.")
    imported: tuple[str, ...] = Field(
        (), description="Sources of imported games to detect on too, e.g. ibraheem2022-human, llmafia."
    )
    imported_games: str | None = Field(
        None, description="A file of imported game ids (relative to the experiment file) to read exactly, valid or "
        "not: a study's pinned game list, its reason in a # comment."
    )
    variants: tuple[str, ...] = Field(("async", "classic"), description="Only games of these variants.")
    valid_only: StrictBool = Field(True, description="Skip games flagged invalid.")
    max_cut: int | None = Field(None, ge=1, description="Cut after at most this many days (default: every day).")
    concurrency: int = Field(8, ge=1, le=10_000, description="Detector calls in flight at once.")
    max_attempts: int = Field(5, ge=1, le=50, description="Tries per detector call, retries included.")
    backoff_base_s: float = Field(1.0, ge=0, description="Base of the exponential backoff between tries.")

    @field_validator("models")
    @classmethod
    def _models(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for spec in v:
            if "/" not in spec or not all(spec.split("/", 1)):
                raise ValueError(f"detector {spec!r} is not provider/model (or policy/most-voted, policy/random)")
            if spec.startswith("policy/") and spec.split("/", 1)[1] not in POLICIES:
                raise ValueError(
                    f"unknown offline detector {spec!r}; known: {', '.join('policy/' + p for p in POLICIES)}"
                )
        dupes = sorted({s for s in v if v.count(s) > 1})
        if dupes:
            raise ValueError(f"detectors must be distinct; repeated: {dupes}")
        return v

    @field_validator("prompt_version")
    @classmethod
    def _version(cls, v: str) -> str:
        with as_field_error():
            load_detector_prompt(v)
        return v

    @field_validator("prompt_file")
    @classmethod
    def _file(cls, v: str | None) -> str | None:
        if v is not None:
            with as_field_error():
                load_detector_prompt_file(v)
        return v

    @field_validator("imported_games")
    @classmethod
    def _pinned(cls, v: str | None) -> str | None:
        if v is not None:
            with as_field_error():
                load_game_list(v)
        return v

    @field_validator("imported")
    @classmethod
    def _imported(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for source in v:
            if not source.strip():
                raise ValueError("an imported source name is empty")
            if source == SIMULATION:
                raise ValueError(f"{SIMULATION!r} is not an imported source: set simulated = true for these games")
        return v

    @field_validator("variants")
    @classmethod
    def _variants(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        known = ("async", "classic", "mini-mafia")
        bad = [x for x in v if x not in known]
        if bad or not v:
            raise ValueError(f"variants must be some of {', '.join(known)}; got {list(v)}")
        return v

    @model_validator(mode="after")
    def _some_games(self) -> DetectorSection:
        if not self.simulated and not self.imported:
            raise ValueError("the detector reads no games: set simulated = true and/or list imported sources")
        if self.imported_games is not None and not self.imported:
            raise ValueError("imported_games pins imported games, but no imported source is listed (imported = [...])")
        return self

    def spec(self, experiment: str | None) -> DetectorSpec:
        """The detection step's options: this experiment's simulated games and/or the imported sources."""
        sources = ((SIMULATION,) if self.simulated else ()) + self.imported
        return DetectorSpec(
            models=self.models,
            prompt_version=self.prompt_version,
            prompt_file=self.prompt_file,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            sources=sources,
            variants=self.variants,
            experiments=(experiment,) if experiment and self.simulated else None,
            valid_only=self.valid_only,
            imported_games=load_game_list(self.imported_games) if self.imported_games else None,
            max_cut=self.max_cut,
            concurrency=self.concurrency,
            max_attempts=self.max_attempts,
            backoff_base_s=self.backoff_base_s,
        )


def resolve_prompt_file(data: dict[str, object], base: Path) -> dict[str, object]:
    """Make a relative `[detector] prompt_file` or `imported_games` relative to the experiment file that names it."""
    section = data.get("detector")
    for key in ("prompt_file", "imported_games"):
        if isinstance(section, dict) and isinstance(section.get(key), str):
            path = Path(str(section[key])).expanduser()
            if not path.is_absolute():
                section = {**section, key: str(base / path)}
                data = {**data, "detector": section}
    return data

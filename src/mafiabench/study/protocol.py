"""The experiment side of the protocol card: what an experiment plays, as plain facts a reference protocol's aspects
point into (`mafiabench.protocols`). One function per study family is not needed: the facts are the experiment's
own settings, resolved as a game will see them (rules with defaults filled, each model's settings, the prompt's
version and how it is read), so a new protocol only needs new facts when it compares something not listed here."""

from __future__ import annotations

from typing import Any

from mafiabench.agents.prompts import resolve_prompts
from mafiabench.backends.endpoints import split_spec
from mafiabench.engine import rules_for
from mafiabench.protocols import ABSENT, Card, card, load_protocol
from mafiabench.study.spec import Experiment

# How every model is reached (no setting of ours changes it): chat completions, the server applying its chat template.
MODEL_API = "chat completions (the server applies the model's chat template)"


def _model(spec: str) -> str:
    return split_spec(spec)[1] if "/" in spec else spec


def experiment_facts(exp: Experiment) -> dict[str, Any]:
    """The experiment's settings as the protocol card reads them (JSON values; lists in the experiment's order)."""
    version, batch_config = exp.prompt_choice
    prompts = resolve_prompts(exp.variant, version, batch_config)
    base = prompts.templates.get("base_prompt", prompts.templates.get("base", ""))
    settings = exp.model_settings()
    models = {_model(spec): s.model_dump(mode="json") for spec, s in settings.items()}
    facts: dict[str, Any] = {
        "variant": exp.variant,
        "prompt": {
            "version": prompts.ident,
            "parser": prompts.parser,
            "others_order": prompts.options.get("others_order", "seat"),
            "composition_order": prompts.options.get("composition_order", "ours"),
            "wrapper": "[INST] … [/INST]" if base.lstrip().startswith("[INST]") else "none",
        },
        "rules": rules_for(exp.variant, exp.rules).model_dump(mode="json"),
        "models": models,
        "all_models": {
            "reprompt_on_failure": sorted({s.reprompt_on_failure for s in settings.values()}),
            "api": MODEL_API,
        },
        "players": sorted({_model(spec) for spec in exp.agent_specs()}),
        "games_per_cell": exp.games_per_cell,
    }
    if exp.detector is not None:
        det = exp.detector_spec()
        facts["detector"] = {
            "models": [_model(m) for m in det.models],
            "temperature": det.temperature,
            "prompt_version": "file:" + str(det.prompt_file) if det.prompt_file else det.prompt_version,
            "imported_games": len(det.imported_games) if det.imported_games is not None else ABSENT,
        }
    if exp.design is not None:
        d = exp.design
        backgrounds = [b if isinstance(b, str) else b.name for b in d.backgrounds]
        facts["design"] = {
            "targets": [_model(t) for t in d.targets],
            "backgrounds": [_model(b) for b in backgrounds],
            "capabilities": list(d.capabilities),
            "games_per_cell": d.games_per_cell or exp.games_per_cell,
        }
    return facts


def protocol_card(exp: Experiment) -> Card | None:
    """The experiment's card against the reference it names (None when it names none)."""
    if exp.reference is None:
        return None
    return card(load_protocol(exp.reference), exp.name, experiment_facts(exp))

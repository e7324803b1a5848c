"""The experiment side of the protocol card: what an experiment plays, as plain facts a reference protocol's aspects
point into (`mafiabench.protocols`). One function per study family is not needed: the facts are the experiment's
own settings, resolved as a game will see them (rules with defaults filled, each model's settings, the prompt's
version and how it is read), so a new protocol only needs new facts when it compares something not listed here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mafiabench.agents.prompts import resolve_prompts
from mafiabench.backends.endpoints import BUILTIN_ENDPOINTS, EndpointConfig, split_spec
from mafiabench.detect.detection_runs import marked_games
from mafiabench.engine import rules_for
from mafiabench.engine.async_mafia import timing_model
from mafiabench.engine.classic import PROPOSALS_SEEN_BY
from mafiabench.engine.events import MAFIA_TEAM
from mafiabench.protocols import ABSENT, LIFECYCLE, Card, CardRow, card, load_protocol
from mafiabench.study.spec import Experiment
from mafiabench.transform.models.widening import SHOWN_INTERVAL


def _model(spec: str) -> str:
    return split_spec(spec)[1] if "/" in spec else spec


# The reference's wrapper of every prompt (its v4.1 templates), as an endpoint's `prompt_template` writes it.
INST = "[INST]\n{prompt}[/INST]\n"


def _api(spec: str, endpoints: Mapping[str, EndpointConfig], prompt_wrapped: bool) -> dict[str, str]:
    """How a model is called and the wrapper its prompt ends up in: the endpoint's template around the prompt,
    whose own text may already be wrapped (a batch_config's templates): then `INST` once, or twice."""
    endpoint = endpoints.get(split_spec(spec)[0])
    options = endpoint.options if endpoint is not None else {}
    api = str(options.get("api", "chat"))
    template = str(options.get("prompt_template", "{prompt}")) if api == "completions" else ""
    if prompt_wrapped and template:
        template = INST if template == "{prompt}" else "twice: " + template
    return {"api": api, "template": template}


def experiment_facts(exp: Experiment) -> dict[str, Any]:
    """The experiment's settings as the protocol card reads them (JSON values; lists in the experiment's order)."""
    version, batch_config = exp.prompt_choice
    prompts = resolve_prompts(exp.variant, version, batch_config)
    base = prompts.templates.get("base_prompt", prompts.templates.get("base", ""))
    wrapped = base.lstrip().startswith("[INST]")
    settings = exp.model_settings()
    endpoints = {**BUILTIN_ENDPOINTS, **exp.endpoint_configs()}
    models = {_model(spec): s.model_dump(mode="json") for spec, s in settings.items()}
    facts: dict[str, Any] = {
        "variant": exp.variant,
        "prompt": {
            "version": prompts.ident,
            "parser": prompts.parser,
            "others_order": prompts.options.get("others_order", "seat"),
            "composition_order": prompts.options.get("composition_order", "ours"),
            "wrapper": "[INST] … [/INST]" if wrapped else "none",
            # Every word of the version a model can read, for the card's item-by-item check of the words.
            "templates": dict(prompts.templates),
            "fragments": dict(prompts.fragments),
        },
        "rules": rules_for(exp.variant, exp.rules).model_dump(mode="json"),
        "models": models,
        "all_models": {"reprompt_on_failure": sorted({s.reprompt_on_failure for s in settings.values()})},
        # How each model is called: `chat` (the server applies the model's chat template) or `completions` (a plain
        # completion of the prompt in the endpoint's template), and that template.
        "model_api": {_model(spec): _api(spec, endpoints, wrapped) for spec in settings},
        "players": sorted({_model(spec) for spec in exp.agent_specs()}),
        "games_per_cell": exp.games_per_cell,
        # What the marts show of a fit, not a setting: the card compares it with the study's statistics.
        "statistics": {"latent_interval": SHOWN_INTERVAL},
    }
    if exp.variant == "async":
        rules: Any = rules_for(exp.variant, exp.rules)
        facts["timing"] = timing_model(rules)
    if exp.detector is not None:
        det = exp.detector_spec()
        facts["detector"] = {
            "models": [_model(m) for m in det.models],
            "temperature": det.temperature,
            "prompt_version": "file:" + str(det.prompt_file) if det.prompt_file else det.prompt_version,
            "imported_games": len(det.imported_games) if det.imported_games is not None else ABSENT,
        }
        if exp.detector.imported_games:
            marked = marked_games(exp.detector.imported_games)
            n = len(det.imported_games)
            facts["detector"]["human_set"] = (
                f"{n - len(marked)} valid by the importer's rules + {len(marked)} inferred "
                f"({'; '.join(marked.values())})" if marked else f"{n} valid by the importer's rules")
    facts["statements"] = statement_facts(exp)
    if exp.design is not None:
        d = exp.design
        backgrounds = [b if isinstance(b, str) else b.name for b in d.backgrounds]
        facts["design"] = {
            "targets": [_model(t) for t in d.targets],
            "backgrounds": [_model(b) for b in backgrounds],
            "capabilities": list(d.capabilities),
            "games_per_cell": d.games_per_cell or exp.games_per_cell,
        }
    if exp.variant == "classic":
        # Who reads a mafioso's night proposal (engine/classic.py), as the card names it.
        facts["visibility"] = {"night_proposals": "the other mafiosos" if PROPOSALS_SEEN_BY == MAFIA_TEAM
                               else PROPOSALS_SEEN_BY}
    if exp.variant == "classic" and exp.cells:
        facts["strategema"] = classic_design_facts(exp)
        # A limited-memory cell reads the phase's events only; does its prompt still say it has the whole record?
        heading = prompts.fragments.get("context_text_current_phase") or prompts.templates.get("base", "")
        full_record = "every vote, every statement" in heading
        facts["strategema"]["limited_memory"]["prompt_says_full_record"] = (
            full_record if facts["strategema"]["limited_memory"]["configurations"] else ABSENT)
    return facts


def statement_facts(exp: Experiment) -> dict[str, Any]:
    """The `[statements]` layer as the WOLF card reads it: what is labelled, by whom, with which words and fields,
    what the assessor sees and what a label can change (agents/statements.py says why each is so)."""
    s = exp.statements
    if s is None:
        return {"on": False}
    from mafiabench.agents.parsing import DECEPTION_TYPES

    fields = ["chain_of_thought", "is_deceptive", "confidence", "deception_type", "reasoning"]
    reprompt = any(m.reprompt_on_failure for m in exp.model_settings().values())
    return {
        "on": True,
        "labelled": "every public message",
        "speaker": s.speaker,
        "listeners": "every other living player" if s.listeners else "none",
        "peer_model": "the listener's own model",
        "context": "the game's own opening (rules, the assessor's name and role) and the assessor's whole memory",
        "peer_history": "none beyond the listener's memory",
        "fields_self": fields,
        "fields_peer": [*fields, "suspicion_level"],
        "deception_types": list(DECEPTION_TYPES),
        "suspicion_meaning": "0 to 1: how strongly the listener now suspects the speaker of being on the mafia's side",
        "failure": "no verdict, flagged a format failure" + ("; re-asked once" if reprompt else ""),
        "max_tokens": s.max_tokens,
        "feedback": "each assessor's own labels in its memory (memory = true)" if s.memory else "no",
        "action_self_report": False,
        "truth": "the game's truth (speaker on the mafia's side; a checkable false claim), and the self-label",
    }


CONDITIONS = ("baseline", "no_speaking", "argmax_voting", "limited_memory")


def _condition(rules: Any) -> str:
    """A classic cell's condition, named as the Strategema tables name it (mart_classic_games)."""
    parts = [name for name, on in (("no_speaking", not rules.speaking), ("argmax_voting", rules.sampling == "argmax"),
                                    ("limited_memory", rules.memory == "current_phase")) if on]
    return "+".join(parts) or "baseline"


def classic_design_facts(exp: Experiment) -> dict[str, Any]:
    """A classic experiment's cells as the Strategema protocol reads them: its main model (the one in most baseline
    cells), which configurations "NxM" each condition plays with it and how many games, and the cross-check models'
    configurations and games."""
    cells = []
    for c in exp.cells:
        rules: Any = rules_for(exp.variant, {**exp.rules, **c.rules})
        models = sorted({_model(spec) for spec in c.agents.values()})
        cells.append((" + ".join(models), f"{rules.n_players}x{rules.n_mafia}", _condition(rules),
                      exp.cell_games(c.games)))
    baseline = [m for m, _, cond, _ in cells if cond == "baseline"]
    main = max(sorted(set(baseline)), key=baseline.count) if baseline else None

    def played(model_is_main: bool, condition: str) -> dict[str, Any]:
        picked = [(conf, n) for m, conf, cond, n in cells if (m == main) == model_is_main and cond == condition]
        games = sorted({n for _, n in picked})
        return {"configurations": sorted({conf for conf, _ in picked}, key=_size),
                "games": games[0] if len(games) == 1 else games}

    return {
        "main_model": main,
        "cross_check_models": sorted({m for m, _, cond, _ in cells if m != main}),
        **{condition: played(True, condition) for condition in CONDITIONS},
        "cross_check": played(False, "baseline"),
    }


def _size(conf: str) -> tuple[int, int]:
    n, m = conf.split("x")
    return int(n), int(m)


def protocol_card(exp: Experiment) -> Card | None:
    """The experiment's card against the reference it names (None when it names none)."""
    if exp.reference is None:
        return None
    c = card(load_protocol(exp.reference), exp.name, experiment_facts(exp))
    return Card(c.protocol, c.experiment, c.rows + tuple(lifecycle_rows(exp)))


def lifecycle_rows(exp: Experiment) -> list[CardRow]:
    """A noted row for each model the price table marks deprecated or retired, with the dates: a published study
    replayed with a retired model cannot be replayed as published (its calls fail)."""
    from mafiabench.prices import free_providers_of, load_prices
    from mafiabench.study.estimate import model_specs

    table = load_prices().with_overrides(exp.prices, free_providers_of(exp.endpoint_configs()))
    rows = []
    for spec in model_specs(exp):
        price = table.lookup(spec)
        if price is None or (price.deprecated is None and price.retired is None):
            continue
        dates = ", ".join(f"{what} {day.isoformat()}" for what, day in
                          (("deprecated", price.deprecated), ("retirement", price.retired)) if day is not None)
        rows.append(CardRow(
            key=f"{LIFECYCLE}.{spec}", group=LIFECYCLE, label=f"Model {spec}, by its provider",
            reference_value=ABSENT, experiment_value=dates, matches=None,
            source=price.lifecycle_source or "the price table (prices.toml)",
            note="after its retirement date the provider refuses its calls, so its games fail",
        ))
    return rows

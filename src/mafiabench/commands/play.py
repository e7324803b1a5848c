"""`mafiabench play`: one game from flags or a small TOML file; prints the transcript, writes the record."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from mafiabench.errors import UserError
from mafiabench.play.config import GameConfig, endpoints_from, load_game_config, validate
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.play.transcript import format_transcript
from mafiabench.record import write_record_atomic

RANDOM_SEAT = "policy/random"  # a seat given neither on the command line nor in the file


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "play",
        help="play one game and print its transcript",
        description="Play one Mafia game between any mix of models and scripted policies. Agent specs: "
        "provider/model (openai/gpt-4.1-mini, anthropic/claude-sonnet-4-5, openrouter/..., fake/demo, "
        "scripted/naive) or policy/random, policy/informed, policy/mafia-votes-detective, policy/always-accuse:NAME, "
        "or human/terminal "
        "to play a seat yourself. Seats not given default to policy/random.",
    )
    p.add_argument("--config", type=Path, help="TOML game file (flags below override it)")
    p.add_argument("--variant", choices=["mini-mafia", "classic"], help="game variant (default mini-mafia)")
    p.add_argument("--seed", type=int, help="game seed (default 0)")
    p.add_argument("--agent", dest="default_agent", help="agent for every seat not set otherwise")
    p.add_argument("--mafioso", help="agent spec for the mafioso(s)")
    p.add_argument("--detective", help="agent spec for the detective")
    p.add_argument("--villager", help="agent spec for the villagers")
    p.add_argument("--rounds", type=int, help="discussion rounds (mini-mafia)")
    p.add_argument("--night", choices=["scripted", "agents"], help="who plays night 1 (mini-mafia)")
    p.add_argument("--prompt-version", help="prompt template version")
    p.add_argument("--out", type=Path, help="write the game record (JSON) here")
    p.add_argument("--quiet", action="store_true", help="do not print the transcript")
    p.set_defaults(func=run)


def build_config(args: argparse.Namespace) -> GameConfig:
    overrides: dict[str, Any] = {}
    if args.variant:
        overrides["variant"] = args.variant
    if args.seed is not None:
        overrides["seed"] = args.seed
    if args.prompt_version:
        overrides["prompt_version"] = args.prompt_version
        overrides["prompt"] = None
    agents = {
        k: v
        for k, v in (
            ("default", args.default_agent),
            ("mafioso", args.mafioso),
            ("detective", args.detective),
            ("villager", args.villager),
        )
        if v
    }
    rules = {k: v for k, v in (("discussion_rounds", args.rounds), ("night", args.night)) if v is not None}
    if args.config:
        base = load_game_config(args.config)
        data = base.model_dump(exclude_none=True)
        data["agents"] = {"default": RANDOM_SEAT, **base.agents, **agents}
        data["rules"] = {**base.rules, **rules}
        data.update(overrides)
        return validate(GameConfig, data, str(args.config))
    data = {"agents": {"default": RANDOM_SEAT, **agents}, "rules": rules, **overrides}
    return validate(GameConfig, data, "command line")


def run(args: argparse.Namespace) -> int:
    cfg = build_config(args)
    pool = BackendPool(endpoints=endpoints_from(cfg.endpoints), cache_dir=cfg.cache_dir)
    try:
        pool.check(list(cfg.agents.values()))  # unknown provider or missing key: fail before any call
    except UserError as exc:
        if not args.config:
            raise
        seats = ", ".join(f"agents.{seat} = {spec!r}" for seat, spec in cfg.agents.items() if spec in str(exc))
        raise UserError(f"{args.config}: {exc}" + (f"\n  (in {seats})" if seats else "")) from None
    spec = GameSpec.build(
        cfg.game_id or f"play-{cfg.variant}-{cfg.seed}",
        cfg.variant,
        cfg.rules,
        cfg.seed,
        cfg.agents,
        models=cfg.models,
        prompt_version=cfg.prompt_choice[0],
        prompt_file=cfg.prompt_choice[1],
    )
    record = asyncio.run(play_game(spec, pool))
    if not args.quiet:
        print(format_transcript(record))
    if record.outcome.get("status") == "abandoned":
        print(f"game abandoned: {record.outcome.get('reason')}")
    if args.out:
        write_record_atomic(record, args.out)
        print(f"record written to {args.out}")
    return 1 if record.error or record.outcome.get("status") == "abandoned" else 0

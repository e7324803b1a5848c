"""`mafiabench play`: one game from flags or a small TOML file; prints the transcript, writes the record."""

from __future__ import annotations

import asyncio
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from mafiabench.backends.endpoints import aclose_clients
from mafiabench.commands import command
from mafiabench.errors import UserError
from mafiabench.play.config import GameConfig, endpoints_from, load_game_config, validate
from mafiabench.play.omniscient_transcript import closing_lines, format_transcript
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.record import GameRecord, write_record_atomic

RANDOM_SEAT = "policy/random"  # a seat given neither on the command line nor in the file


class Variant(StrEnum):
    mini_mafia = "mini-mafia"
    classic = "classic"


class Night(StrEnum):
    scripted = "scripted"
    agents = "agents"


def register(app: typer.Typer) -> None:
    command(
        app,
        "play",
        short_help="play one game and print its transcript",
        help="Play one Mafia game between any mix of models and scripted policies. Agent specs: "
        "provider/model (openai/gpt-4.1-mini, anthropic/claude-sonnet-4-5, openrouter/..., fake/demo, "
        "scripted/naive) or policy/random, policy/informed, policy/mafia-votes-detective, policy/always-accuse:NAME, "
        "or human/terminal "
        "to play a seat yourself. Seats not given default to policy/random.",
    )(run)


def build_config(
    *,
    config: Path | None = None,
    variant: str | None = None,
    seed: int | None = None,
    default_agent: str | None = None,
    mafioso: str | None = None,
    detective: str | None = None,
    villager: str | None = None,
    rounds: int | None = None,
    night: str | None = None,
    prompt_version: str | None = None,
) -> GameConfig:
    """The game: the TOML file if any, with every flag given overriding it."""
    overrides: dict[str, Any] = {}
    if variant:
        overrides["variant"] = variant
    if seed is not None:
        overrides["seed"] = seed
    if prompt_version:
        overrides["prompt_version"] = prompt_version
        overrides["prompt"] = None
    agents = {
        k: v
        for k, v in (("default", default_agent), ("mafioso", mafioso), ("detective", detective), ("villager", villager))
        if v
    }
    rules = {k: v for k, v in (("discussion_rounds", rounds), ("night", night)) if v is not None}
    if config:
        base = load_game_config(config, seats=agents)
        data = base.model_dump(exclude_none=True)
        data["agents"] = {"default": RANDOM_SEAT, **base.agents, **agents}
        data["rules"] = {**base.rules, **rules}
        data.update(overrides)
        return validate(GameConfig, data, str(config))
    data = {"agents": {"default": RANDOM_SEAT, **agents}, "rules": rules, **overrides}
    return validate(GameConfig, data, "command line")


def run(
    config: Annotated[Path | None, typer.Option(help="TOML game file (flags below override it)")] = None,
    variant: Annotated[Variant | None, typer.Option(help="game variant (default mini-mafia)")] = None,
    seed: Annotated[int | None, typer.Option(help="game seed (default 0)")] = None,
    default_agent: Annotated[str | None, typer.Option("--agent", help="agent for every seat not set otherwise")] = None,
    mafioso: Annotated[str | None, typer.Option(help="agent spec for the mafioso(s)")] = None,
    detective: Annotated[str | None, typer.Option(help="agent spec for the detective")] = None,
    villager: Annotated[str | None, typer.Option(help="agent spec for the villagers")] = None,
    rounds: Annotated[int | None, typer.Option(help="discussion rounds (mini-mafia)")] = None,
    night: Annotated[Night | None, typer.Option(help="who plays night 1 (mini-mafia)")] = None,
    prompt_version: Annotated[str | None, typer.Option(help="prompt template version")] = None,
    out: Annotated[Path | None, typer.Option(help="write the game record (JSON) here")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="do not print the transcript")] = False,
) -> int:
    cfg = build_config(
        config=config,
        variant=variant.value if variant else None,
        seed=seed,
        default_agent=default_agent,
        mafioso=mafioso,
        detective=detective,
        villager=villager,
        rounds=rounds,
        night=night.value if night else None,
        prompt_version=prompt_version,
    )
    pool = BackendPool(endpoints=endpoints_from(cfg.endpoints), cache_dir=cfg.cache_dir)
    try:
        pool.check(list(cfg.agents.values()))  # unknown provider or missing key: fail before any call
    except UserError as exc:
        if not config:
            raise
        seats = ", ".join(f"agents.{seat} = {spec!r}" for seat, spec in cfg.agents.items() if spec in str(exc))
        raise UserError(f"{config}: {exc}" + (f"\n  (in {seats})" if seats else "")) from None
    spec = GameSpec.build(
        cfg.game_id or f"play-{cfg.variant}-{cfg.seed}",
        cfg.variant,
        cfg.rules,
        cfg.seed,
        cfg.agents,
        models=cfg.models,
        prompt_version=cfg.prompt_choice[0],
        prompt_file=cfg.prompt_choice[1],
        statements=cfg.statements,
    )
    record = asyncio.run(_play_and_close(spec, pool))
    if any(a.startswith("human/") for a in cfg.agents.values()):
        # the person watched the game unfold: tell them how it ended, not the whole transcript again
        print("\n".join(closing_lines(record)))
    elif not quiet:
        print(format_transcript(record))  # it ends with the abandoned or failed line itself
    elif record.outcome.get("status") == "abandoned":
        print(f"game abandoned: {record.outcome.get('reason')}")
    if out:
        write_record_atomic(record, out)
        print(f"record written to {out}")
    return 1 if record.error or record.outcome.get("status") == "abandoned" else 0


async def _play_and_close(spec: GameSpec, pool: BackendPool) -> GameRecord:
    """Play, then close the SDK clients on this loop (an aiohttp session left open warns when collected)."""
    try:
        return await play_game(spec, pool)
    finally:
        await aclose_clients()

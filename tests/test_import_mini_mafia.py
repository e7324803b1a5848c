"""Mini-Mafia batch importer: hand-checked fixtures for every quirk, a round trip through the real engine, model
names, the design derivation, and idempotent landing."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import duckdb
import pytest

from mafiabench.cli import main
from mafiabench.engine import Decision, GameEngine, make_game
from mafiabench.importers import (
    UnreadableGame,
    mini_mafia_design,
    normalise_model,
    read_mini_mafia,
    run_import,
    to_batch_game,
)
from mafiabench.record import GameRecord, record_from_engine
from mafiabench.testing import play_random
from mafiabench.warehouse.raw import connect

FIXTURES = Path(__file__).parent / "fixtures" / "datasets" / "mini_mafia"
B1 = "batch_20250814_101500_v4.1"
B2 = "batch_20250815_090000_v4.0"


@pytest.fixture(scope="module")
def items() -> dict[str, GameRecord | UnreadableGame]:
    out: dict[str, GameRecord | UnreadableGame] = {}
    for it in read_mini_mafia(FIXTURES):
        key = it.source_file if isinstance(it, UnreadableGame) else it.provenance.source_file
        assert key is not None
        out[key] = it
    return out


def game(items: dict[str, GameRecord | UnreadableGame], name: str) -> GameRecord:
    it = items[name]
    assert isinstance(it, GameRecord), it
    return it


def shape(rec: GameRecord) -> list[tuple[object, ...]]:
    return [(e.phase, e.round, e.type, e.actor, e.target, e.visibility,
             "F" if e.format_failure else "", "R" if e.random_fallback else "", "T" if e.truncated else "",
             "B" if e.tie_break else "") for e in rec.events]


# -- model identity and design ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "provider", "expected"),
    [
        ("GPT-4.1-mini", "openai", "openai/gpt-4.1-mini"),
        ("gpt-4.1-mini-2025-04-14", "openai", "openai/gpt-4.1-mini"),
        ("openai/gpt-4.1-mini", None, "openai/gpt-4.1-mini"),
        ("gpt-4o", None, "openai/gpt-4o"),
        ("Some-Model-7B-Instruct-Q4_K_M.gguf", "local", "local/some-model-7b-instruct"),
        ("models/Qwen2.5-7B-Instruct-Q8_0.gguf", None, "local/qwen2.5-7b-instruct"),
        ("Mistral-7B-Instruct-v0.3-IQ4_XS.gguf", "local", "local/mistral-7b-instruct-v0.3"),
        ("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "local", "local/llama-3.1-8b-instruct"),
        ("claude-3-5-haiku-20241022", "anthropic", "anthropic/claude-3.5-haiku"),
        ("claude-3-5-haiku-latest", "anthropic", "anthropic/claude-3.5-haiku"),
        ("grok-3-mini", "x-ai", "xai/grok-3-mini"),
        ("models/gemini-2.5-flash-lite", "google", "google/gemini-2.5-flash-lite"),
        ("meta-llama/Llama-3.3-70B-Instruct-Turbo", "together", "together/llama-3.3-70b-instruct-turbo"),
        ("deepseek-chat", "deepseek", "deepseek/deepseek-chat"),
        ("GPT 4o Mini", None, "openai/gpt-4o-mini"),
    ],
)
def test_model_names_are_normalised(raw: str, provider: str | None, expected: str) -> None:
    assert normalise_model(raw, provider) == expected


def test_design_from_the_models_of_the_roles() -> None:
    a, b, c = "openai/gpt-4.1-mini", "xai/grok-3-mini", "local/qwen2.5-7b-instruct"
    assert mini_mafia_design({"mafioso": a, "detective": a, "villager": a}) | {"cell": None} == {
        "cell": None, "capabilities": ["deceive", "detect", "disclose"], "target": a, "background": a}
    deceive = mini_mafia_design({"mafioso": b, "detective": a, "villager": a})
    assert (deceive["capabilities"], deceive["target"], deceive["background"]) == (["deceive"], b, a)
    detect = mini_mafia_design({"mafioso": a, "detective": a, "villager": b})
    assert (detect["capabilities"], detect["target"], detect["background"]) == (["detect"], b, a)
    disclose = mini_mafia_design({"mafioso": a, "detective": b, "villager": a})
    assert (disclose["capabilities"], disclose["target"], disclose["background"]) == (["disclose"], b, a)
    mixed = mini_mafia_design({"mafioso": a, "detective": b, "villager": c})
    assert (mixed["capabilities"], mixed["target"], mixed["background"]) == ([], None, "mixed")
    assert mixed["cell"] == f"mixed|mafioso={a};detective={b};villager={c}"
    # named as design.py names the cells of a simulated experiment
    assert deceive["cell"] == f"deceive|{b}|{a}" and disclose["cell"] == f"disclose|{b}|{a}"
    assert mini_mafia_design({"mafioso": a, "detective": a, "villager": a})["cell"] == f"homogeneous|{a}"


def test_batch_models_design_and_prompt(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, f"{B1}/game_0000.json")
    # the mafioso's and the detective's models are the same model spelled two ways: a "detect" cell
    assert {p.role: (p.model, p.model_raw) for p in g.players} == {
        "detective": ("openai/gpt-4.1-mini", "GPT-4.1-mini"),
        "mafioso": ("openai/gpt-4.1-mini", "gpt-4.1-mini-2025-04-14"),
        "villager": ("local/some-model-7b-instruct", "Some-Model-7B-Instruct-Q4_K_M.gguf"),
    }
    assert all(p.agent == p.model for p in g.players)
    assert g.design is not None
    assert {k: g.design[k] for k in ("experiment", "game_index", "capabilities", "target", "background")} == {
        "experiment": B1, "game_index": 0, "capabilities": ["detect"], "target": "local/some-model-7b-instruct",
        "background": "openai/gpt-4.1-mini"}
    assert g.design["agents"]["villager"]["temperature"] == 0.7
    templates = json.loads((FIXTURES / B1 / "batch_config.json").read_text())["prompt_config"]["templates"]
    canonical = json.dumps(templates, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
    assert g.prompt == {"version": "v4.1", "sha256": hashlib.sha256(canonical).hexdigest()}
    homogeneous = game(items, f"{B2}/game_0000.json")
    assert homogeneous.design is not None and homogeneous.prompt is not None
    assert homogeneous.design["capabilities"] == ["deceive", "detect", "disclose"]
    assert homogeneous.design["target"] == "anthropic/claude-3.5-haiku"
    assert homogeneous.prompt["version"] == "v4.0"


# -- the transcript rebuilt from the memories ------------------------------------------------------------------------


def test_clean_game_rebuilt_from_memories(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, f"{B1}/game_0000.json")
    assert g.variant == "mini-mafia" and g.seed is None
    assert g.game_id == f"mini-mafia-batch-{B1.lower()}_game_0000"
    assert [(p.seat, p.name, p.role) for p in g.players] == [
        (0, "Alice", "detective"), (1, "Bob", "mafioso"), (2, "Charlie", "villager"), (3, "Diana", "villager")]
    assert shape(g) == [
        ("setup", 0, "game_start", None, None, "public", "", "", "", ""),
        ("setup", 0, "role_assigned", "Alice", None, "player:Alice", "", "", "", ""),
        ("setup", 0, "role_assigned", "Bob", None, "player:Bob", "", "", "", ""),
        ("setup", 0, "role_assigned", "Charlie", None, "player:Charlie", "", "", "", ""),
        ("setup", 0, "role_assigned", "Diana", None, "player:Diana", "", "", "", ""),
        ("night", 1, "phase_start", None, None, "public", "", "", "", ""),
        ("night", 1, "kill", "Bob", "Charlie", "team:mafia", "", "", "", ""),
        ("night", 1, "death", None, "Charlie", "public", "", "", "", ""),
        ("night", 1, "investigate", "Alice", "Bob", "player:Alice", "", "", "", ""),
        ("day", 1, "phase_start", None, None, "public", "", "", "", ""),
        ("day", 1, "message", "Diana", None, "public", "", "", "", ""),
        ("day", 1, "message", "Alice", None, "public", "", "", "", ""),
        ("day", 1, "silence", "Bob", None, "public", "F", "R", "", ""),
        ("day", 1, "message", "Bob", None, "public", "", "", "T", ""),
        ("day", 1, "message", "Diana", None, "public", "", "", "", ""),
        ("day", 1, "message", "Alice", None, "public", "", "", "", ""),
        ("day", 1, "vote", "Alice", "Bob", "public", "", "", "", ""),
        ("day", 1, "vote", "Bob", "Alice", "public", "F", "R", "", ""),
        ("day", 1, "vote", "Diana", "Bob", "public", "", "", "", ""),
        ("day", 1, "elimination", None, "Bob", "public", "", "", "", ""),
        ("end", 1, "game_end", None, None, "public", "", "", "", ""),
    ]
    ev = g.events
    assert ev[8].data == {"result": "mafioso", "scripted": True}
    assert [e.data["discussion_round"] for e in ev[10:16]] == [1, 1, 1, 2, 2, 2]
    assert ev[11].text == "I investigated Bob. Bob is the mafioso, vote Bob!"  # `You` mapped to Alice
    assert ev[12].text == "Bob remained silent."
    assert ev[13].text.endswith("think clearly")  # the `..."` cut marker removed, the message flagged
    assert ev[19].data == {"votes": {"Bob": 2, "Alice": 1}, "role": "mafioso", "role_revealed": False}
    assert ev[20].data["roles"] == {"Alice": "detective", "Bob": "mafioso", "Charlie": "villager",
                                    "Diana": "villager"}
    assert g.rules == {"discussion_rounds": 2, "message_limit": 120, "night": "scripted",
                       "mafioso_knows_detective": False, "names": ["Alice", "Bob", "Charlie", "Diana"]}
    assert g.outcome == {"status": "finished", "winner": "town", "reason": "mafioso arrested",
                         "tie_decided": False, "days": 1}
    assert g.validity == {"valid": True, "reason": None}
    raw = (FIXTURES / B1 / "game_0000.json").read_bytes()
    assert g.provenance.source == "mini-mafia-batch"
    assert g.provenance.source_sha256 == hashlib.sha256(raw).hexdigest()


def test_tie_break_and_the_older_protocol_lines(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, f"{B1}/game_0001.json")
    assert g.rules["mafioso_knows_detective"] is True and g.rules["discussion_rounds"] == 1
    info = [e for e in g.events if e.type == "info"]
    assert [(e.target, e.visibility) for e in info] == [("Bob", "player:Charlie")]
    death = next(e for e in g.events if e.type == "death")
    assert death.target == "Alice"  # from "Night 1: The villager Alice was found dead."
    votes = [(e.actor, e.target) for e in g.events if e.type == "vote"]
    assert votes == [("Bob", "Charlie"), ("Charlie", "Diana"), ("Diana", "Bob")]
    arrest = next(e for e in g.events if e.type == "elimination")
    assert arrest.target == "Diana" and arrest.tie_break
    assert g.outcome == {"status": "finished", "winner": "mafia", "reason": "innocent arrested",
                         "tie_decided": True, "days": 1}
    assert g.validity["valid"] is True


def test_memories_that_disagree_are_flagged(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, f"{B1}/game_0002.json")
    assert g.validity["valid"] is False and g.validity["reason"] == "inconsistent memories"
    assert any("Charlie's messages differ" in d for d in g.validity["details"])
    assert g.outcome["winner"] == "town"  # still rebuilt from the complete memory


def test_game_without_votes_is_landed_invalid(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, f"{B1}/game_0003.json")
    assert g.validity["reason"] == "no votes cast" and g.validity["valid"] is False
    assert "also: no winner recorded" in g.validity["details"]
    assert g.outcome == {"status": "unfinished", "winner": None, "reason": "no arrest recorded",
                         "tie_decided": False, "days": 1}
    assert not [e for e in g.events if e.type in ("vote", "elimination")]


def test_unreadable_games_are_listed_with_file_field_and_value(items: dict[str, GameRecord | UnreadableGame]
                                                               ) -> None:
    bad = {k: v.reason for k, v in items.items() if isinstance(v, UnreadableGame)}
    assert set(bad) == {f"{B1}/game_0004.json", f"{B1}/game_0005.json", "batch_20250816_000000_v4.1/game_0000.json"}
    assert bad[f"{B1}/game_0004.json"].startswith(f"{B1}/game_0004.json: invalid JSON")
    assert bad[f"{B1}/game_0005.json"] == f"{B1}/game_0005.json: field 'players' is missing"
    assert "batch_config.json: model_configs: field 'villager' is missing" in bad[
        "batch_20250816_000000_v4.1/game_0000.json"]


def test_one_batch_or_one_file_gives_the_same_games(items: dict[str, GameRecord | UnreadableGame]) -> None:
    ids = {it.game_id: it.provenance.source_file for it in read_mini_mafia(FIXTURES / B1)
           if isinstance(it, GameRecord)}
    assert ids == {it.game_id: k for k, it in items.items() if isinstance(it, GameRecord) and k.startswith(B1)}
    (one,) = read_mini_mafia(FIXTURES / B1 / "game_0000.json")
    assert isinstance(one, GameRecord) and one.provenance.source_file == f"{B1}/game_0000.json"


# -- round trip through the engine -----------------------------------------------------------------------------------


def simulate(seed: int, rules: dict[str, object]) -> GameRecord:
    """A Mini-Mafia game with random answers: silences, truncated messages and random votes included."""
    def say(rng: random.Random, d: Decision, game: GameEngine) -> str:
        return "y" * 260 if rng.random() < 0.3 else f"I suspect {rng.choice(['Alice', 'Bob', 'Diana'])}, honestly."

    g = play_random(make_game("mini-mafia", rules, seed), random.Random(seed), failure_rate=0.15, say=say)
    names = {p.name: "openai/gpt-4.1-mini" for p in g.players}
    return record_from_engine(f"sim-{seed}", g, names, names)


def test_round_trip_through_the_batch_format(tmp_path: Path) -> None:
    """A simulated game written in the batch format is imported back to the very same log and outcome."""
    batch = tmp_path / "batch_20250101_000000_v4.1"
    batch.mkdir()
    (batch / "batch_config.json").write_text(json.dumps({
        "batch_id": batch.name, "prompt_config": {"version": "v4.1", "message_limit": 200, "templates": {}},
        "model_configs": {r: {"type": "openai", "model": "gpt-4.1-mini"} for r in ("detective", "mafioso",
                                                                                    "villager")}}))
    simulated = {}
    for i in range(40):
        rules = {"discussion_rounds": i % 4, "mafioso_knows_detective": i % 5 == 0}
        simulated[i] = simulate(i, rules)
        (batch / f"game_{i:04d}.json").write_text(json.dumps(to_batch_game(simulated[i], batch.name, i)))
    imported = list(read_mini_mafia(tmp_path))
    assert len(imported) == 40
    for rec in imported:
        assert isinstance(rec, GameRecord)
        assert rec.design is not None
        sim = simulated[rec.design["game_index"]]
        assert [e.to_dict() for e in rec.events] == [e.to_dict() for e in sim.events]
        assert rec.outcome == sim.outcome
        assert {**rec.rules, "names": None} == {**sim.rules, "names": None}
        assert rec.validity == {"valid": True, "reason": None}


# -- landing -----------------------------------------------------------------------------------------------------------


def test_import_is_idempotent(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    con = connect(db)
    first = run_import("mini-mafia", FIXTURES, con)
    assert (first.games_read, first.landed, first.skipped, len(first.unreadable)) == (8, 5, 0, 3)
    assert first.valid == 3 and first.invalid == {"inconsistent memories": 1, "no votes cast": 1}
    tables = ("raw_games", "raw_players", "raw_events")
    before = {t: con.execute(f"select count(*) from {t}").fetchone() for t in tables}
    second = run_import("mini-mafia", FIXTURES, con)
    assert (second.games_read, second.landed, second.skipped) == (8, 0, 5)
    assert {t: con.execute(f"select count(*) from {t}").fetchone() for t in tables} == before
    row = con.execute("select source, source_file, valid, invalid_reason, days, capabilities from raw_games "
                      "where game_id = ?", [f"mini-mafia-batch-{B1.lower()}_game_0003"]).fetchone()
    assert row == ("mini-mafia-batch", f"{B1}/game_0003.json", False, "no votes cast", 1, ["detect"])
    con.close()


def test_cli_prints_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "w.duckdb"
    assert main(["import", "mini-mafia", str(FIXTURES), "--warehouse", str(db)]) == 0
    out = capsys.readouterr().out
    assert "8 games read" in out and "landed: 5" in out and "unreadable (not landed): 3" in out
    assert main(["import", "mini-mafia", str(FIXTURES), "--warehouse", str(db), "--json", "--strict"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["skipped"] == 5 and report["landed"] == 0
    assert main(["import", "mini-mafia", str(tmp_path / "missing"), "--warehouse", str(db)]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    assert duckdb.connect(str(db), read_only=True).execute("select count(*) from raw_games").fetchone() == (5,)


def test_records_are_written_once_when_asked(tmp_path: Path) -> None:
    con = connect(tmp_path / "w.duckdb")
    src = tmp_path / "data"
    shutil.copytree(FIXTURES / B2, src / B2)
    run_import("mini-mafia", src, con, records_dir=tmp_path / "records")
    (path,) = (tmp_path / "records").glob("*.json")
    rec = GameRecord.from_json(path.read_text())
    assert rec.provenance.source_file == f"{B2}/game_0000.json"
    con.close()

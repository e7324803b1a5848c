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

FIXTURES = Path(__file__).parents[1] / "fixtures" / "datasets" / "mini_mafia"
B40 = "batch_20250815_120000_v4.0"
B41 = "batch_20250821_101500_v4.1"
BT = "batch_20250822_090000_v4.1_temp0.3"
BAD = "batch_20250823_000000_v4.1"


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
        # LLMafia's games use both Together endpoints of one model (niveck/LLMafia games/*/config.json)
        ("meta-llama/Llama-3.3-70B-Instruct-Turbo-Free", "together", "together/llama-3.3-70b-instruct-turbo"),
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
    g = game(items, f"{B41}/game_0000.json")
    # the detective's and the villager's models are the same model spelled two ways: a "deceive" cell
    assert {p.role: (p.model, p.model_raw) for p in g.players} == {
        "detective": ("openai/gpt-4.1-mini", "gpt-4.1-mini"),
        "mafioso": ("deepseek/deepseek-chat", "deepseek-chat"),
        "villager": ("openai/gpt-4.1-mini", "GPT-4.1-mini"),
    }
    assert all(p.agent == p.model for p in g.players)
    assert g.design is not None
    assert {k: g.design[k] for k in ("experiment", "batch_id", "game_index", "capabilities", "target",
                                     "background", "cell")} == {
        "experiment": "mini_mafia", "batch_id": B41, "game_index": 0, "capabilities": ["deceive"],
        "target": "deepseek/deepseek-chat", "background": "openai/gpt-4.1-mini",
        "cell": "deceive|deepseek/deepseek-chat|openai/gpt-4.1-mini|prompt=v4.1"}
    assert g.design["agents"]["villager"] == {"type": "openai", "model": "GPT-4.1-mini", "temperature": 0.7}
    templates = json.loads((FIXTURES / B41 / "batch_config.json").read_text())["prompt_config"]["templates"]
    canonical = json.dumps(templates, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
    sha = hashlib.sha256(canonical).hexdigest()
    assert g.prompt == {"version": "v4.1", "sha256": sha, "templates_sha256": sha}
    # v4.0: a local model named by its path; one model everywhere: homogeneous
    homogeneous = game(items, f"{B40}/game_0000.json")
    assert homogeneous.design is not None and homogeneous.prompt is not None
    assert {(p.model, p.model_raw) for p in homogeneous.players} == {("local/mistral", "mistral.gguf")}
    assert homogeneous.design["capabilities"] == ["deceive", "detect", "disclose"]
    assert homogeneous.design["cell"] == "homogeneous|local/mistral|prompt=v4.0"
    assert homogeneous.design["agents"]["mafioso"] == {"type": "local", "n_ctx": 2048, "model_file": "mistral.gguf"}
    assert homogeneous.prompt["version"] == "v4.0"
    # `_temp0.3`: the version is still v4.1, the temperature is kept on the game
    tempered = game(items, f"{BT}/game_0000.json")
    assert tempered.design is not None and tempered.prompt is not None
    assert tempered.prompt["version"] == "v4.1" and tempered.design["temperature"] == 0.3
    assert (tempered.design["capabilities"], tempered.design["target"], tempered.design["background"]) == (
        ["detect"], "anthropic/claude-3.5-haiku", "openai/gpt-4.1-mini")


# -- the transcript rebuilt from the memories ------------------------------------------------------------------------


def test_clean_game_rebuilt_from_memories(items: dict[str, GameRecord | UnreadableGame]) -> None:
    """The real v4.0 shape: the victim's memory is its role line and `Day 1 begins.`; no seats."""
    g = game(items, f"{B40}/game_0000.json")
    assert g.variant == "mini-mafia" and g.seed is None
    assert g.game_id == f"mini-mafia-batch-{B40.lower()}_game_0000"
    assert [(p.seat, p.name, p.role) for p in g.players] == [
        (None, "Alice", "mafioso"), (None, "Bob", "villager"), (None, "Charlie", "villager"),
        (None, "Diana", "detective")]
    assert shape(g) == [
        ("setup", 0, "game_start", None, None, "public", "", "", "", ""),
        ("setup", 0, "role_assigned", "Alice", None, "player:Alice", "", "", "", ""),
        ("setup", 0, "role_assigned", "Bob", None, "player:Bob", "", "", "", ""),
        ("setup", 0, "role_assigned", "Charlie", None, "player:Charlie", "", "", "", ""),
        ("setup", 0, "role_assigned", "Diana", None, "player:Diana", "", "", "", ""),
        ("night", 1, "phase_start", None, None, "public", "", "", "", ""),
        ("night", 1, "kill", "Alice", "Charlie", "team:mafia", "", "", "", ""),
        ("night", 1, "death", None, "Charlie", "public", "", "", "", ""),
        ("night", 1, "investigate", "Diana", "Alice", "player:Diana", "", "", "", ""),
        ("day", 1, "phase_start", None, None, "public", "", "", "", ""),
        ("day", 1, "message", "Bob", None, "public", "", "", "", ""),
        ("day", 1, "message", "Diana", None, "public", "", "", "", ""),
        ("day", 1, "message", "Alice", None, "public", "", "", "", ""),
        ("day", 1, "message", "Alice", None, "public", "", "", "", ""),
        ("day", 1, "message", "Bob", None, "public", "", "", "", ""),
        ("day", 1, "message", "Diana", None, "public", "", "", "", ""),
        ("day", 1, "vote", "Alice", "Bob", "public", "", "", "", ""),
        ("day", 1, "vote", "Bob", "Alice", "public", "", "", "", ""),
        ("day", 1, "vote", "Diana", "Alice", "public", "", "", "", ""),
        ("day", 1, "elimination", None, "Alice", "public", "", "", "", ""),
        ("end", 1, "game_end", None, None, "public", "", "", "", ""),
    ]
    ev = g.events
    assert ev[8].data == {"result": "mafioso", "scripted": True}
    assert [e.data["discussion_round"] for e in ev[10:16]] == [1, 1, 1, 2, 2, 2]
    assert ev[11].text == "Alice, where were you last night?"  # `You` in Diana's memory mapped to Diana
    assert ev[19].data == {"votes": {"Bob": 1, "Alice": 2}, "role": "mafioso", "role_revealed": False}
    assert ev[20].data["roles"] == {"Alice": "mafioso", "Bob": "villager", "Charlie": "villager",
                                    "Diana": "detective"}
    assert g.rules == {"discussion_rounds": 2, "message_limit": 200, "night": "scripted",
                       "mafioso_knows_detective": False, "names": ["Alice", "Bob", "Charlie", "Diana"],
                       "cut_messages": False, "candidate_order": "alphabetical"}
    assert g.outcome == {"status": "finished", "winner": "town", "reason": "mafioso arrested",
                         "tie_decided": False, "days": 1}
    assert g.validity == {"valid": True, "reason": None}
    raw = (FIXTURES / B40 / "game_0000.json").read_bytes()
    assert g.provenance.source == "mini-mafia-batch"
    assert g.provenance.source_sha256 == hashlib.sha256(raw).hexdigest()


def test_silences_and_random_votes_are_format_failures(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, f"{B40}/game_0001.json")
    talk = [(e.type, e.actor, e.data["discussion_round"], e.format_failure, e.random_fallback)
            for e in g.events if e.type in ("message", "silence")]
    assert talk == [("silence", "Alice", 1, True, True), ("message", "Bob", 1, False, False),
                    ("message", "Charlie", 1, False, False), ("message", "Alice", 2, False, False),
                    ("message", "Charlie", 2, False, False), ("silence", "Bob", 2, True, True)]
    votes = [(e.actor, e.target, e.format_failure, e.random_fallback) for e in g.events if e.type == "vote"]
    assert votes == [("Alice", "Bob", False, False), ("Bob", "Alice", False, False), ("Charlie", "Bob", True, True)]
    assert g.outcome["winner"] == "town" and g.validity["valid"] is True


def test_three_way_tie_is_broken_against_the_villager(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, f"{B40}/game_0002.json")
    arrest = next(e for e in g.events if e.type == "elimination")
    assert arrest.target == "Charlie" and arrest.tie_break
    assert arrest.data == {"votes": {"Bob": 1, "Charlie": 1, "Alice": 1}, "role": "villager", "role_revealed": False}
    assert g.outcome == {"status": "finished", "winner": "mafia", "reason": "innocent arrested",
                         "tie_decided": True, "days": 1}
    assert g.validity["valid"] is True


def test_memories_that_disagree_are_flagged(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, f"{B40}/game_0003.json")
    assert g.validity["valid"] is False and g.validity["reason"] == "inconsistent memories"
    assert g.validity["details"] == ["Diana's messages differ from Bob's"]
    assert g.outcome["winner"] == "town"  # still rebuilt from the complete memory (Bob's)


def test_victim_memory_of_any_other_shape_is_flagged(tmp_path: Path) -> None:
    """Only `Day 1 begins.` (the real shape) or a prefix of the complete memory pass the cross-check."""
    batch = tmp_path / B40
    shutil.copytree(FIXTURES / B40, batch)
    data = json.loads((batch / "game_0000.json").read_text())
    charlie = next(p for p in data["players"] if p["name"] == "Charlie")
    assert charlie["memory"] == ["You're Charlie, the villager.", "Day 1 begins."]
    charlie["memory"] = ["You're Charlie, the villager.", "Day 1 begins.", 'Bob: "Charlie is gone."']
    (batch / "game_0000.json").write_text(json.dumps(data))
    (one,) = read_mini_mafia(batch / "game_0000.json")
    assert isinstance(one, GameRecord) and one.validity["reason"] == "inconsistent memories"
    assert "the night victim Charlie's memory is neither" in one.validity["details"][0]


def test_unreadable_games_are_listed_with_file_field_and_value(items: dict[str, GameRecord | UnreadableGame]
                                                               ) -> None:
    bad = {k: v.reason for k, v in items.items() if isinstance(v, UnreadableGame)}
    assert set(bad) == {f"{B40}/game_0004.json", f"{B41}/game_0002.json", f"{BAD}/game_0000.json"}
    assert bad[f"{B40}/game_0004.json"].startswith(f"{B40}/game_0004.json: invalid JSON")
    assert bad[f"{B41}/game_0002.json"] == f"{B41}/game_0002.json: field 'players' is missing"
    assert "batch_config.json: model_configs: field 'villager' is missing" in bad[f"{BAD}/game_0000.json"]


def test_one_batch_or_one_file_gives_the_same_games(items: dict[str, GameRecord | UnreadableGame]) -> None:
    ids = {it.game_id: it.provenance.source_file for it in read_mini_mafia(FIXTURES / B40)
           if isinstance(it, GameRecord)}
    assert ids == {it.game_id: k for k, it in items.items() if isinstance(it, GameRecord) and k.startswith(B40)}
    (one,) = read_mini_mafia(FIXTURES / B40 / "game_0000.json")
    assert isinstance(one, GameRecord) and one.provenance.source_file == f"{B40}/game_0000.json"
    # the study defaults to the folder the batches sit in, however the import was pointed at them
    assert one.design is not None and one.design["experiment"] == "mini_mafia"
    (named,) = read_mini_mafia(FIXTURES / B40 / "game_0000.json", study="paper")
    assert isinstance(named, GameRecord) and named.design is not None and named.design["experiment"] == "paper"


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
    assert (first.games_read, first.landed, first.skipped, len(first.unreadable)) == (10, 7, 0, 3)
    assert first.valid == 6 and first.invalid == {"inconsistent memories": 1}
    assert first.studies == {"mini_mafia": 7}
    tables = ("raw_games", "raw_players", "raw_events")
    before = {t: con.execute(f"select count(*) from {t}").fetchone() for t in tables}
    second = run_import("mini-mafia", FIXTURES, con)
    assert (second.games_read, second.landed, second.skipped) == (10, 0, 7)
    assert {t: con.execute(f"select count(*) from {t}").fetchone() for t in tables} == before
    row = con.execute("select source, source_file, valid, invalid_reason, days, capabilities, experiment "
                      "from raw_games where game_id = ?", [f"mini-mafia-batch-{B40.lower()}_game_0003"]).fetchone()
    assert row == ("mini-mafia-batch", f"{B40}/game_0003.json", False, "inconsistent memories", 1,
                   ["deceive", "detect", "disclose"], "mini_mafia")
    assert con.execute("select count(*), count(seat) from raw_players").fetchone() == (28, 0)
    con.close()


def test_cli_prints_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "w.duckdb"
    assert main(["import", "mini-mafia", str(FIXTURES), "--warehouse", str(db)]) == 0
    out = capsys.readouterr().out
    assert "10 games read" in out and ": 7 landed," in out and "3 unreadable (not landed)" in out
    assert out.count("  unreadable: ") == 3 and "study mini_mafia: 7 games" in out
    assert main(["import", "mini-mafia", str(FIXTURES), "--warehouse", str(db), "--json", "--strict"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["skipped"] == 7 and report["landed"] == 0
    assert main(["import", "mini-mafia", str(tmp_path / "missing"), "--warehouse", str(db)]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    assert duckdb.connect(str(db), read_only=True).execute("select count(*) from raw_games").fetchone() == (7,)


def test_records_are_written_once_when_asked(tmp_path: Path) -> None:
    con = connect(tmp_path / "w.duckdb")
    src = tmp_path / "data"
    shutil.copytree(FIXTURES / BT, src / BT)
    run_import("mini-mafia", src, con, records_dir=tmp_path / "records")
    (path,) = (tmp_path / "records").glob("*.json")
    rec = GameRecord.from_json(path.read_text())
    assert rec.provenance.source_file == f"{BT}/game_0000.json"
    con.close()


def test_a_game_copied_from_another_batch_is_never_counted_in_the_folder_it_sits_in(tmp_path: Path) -> None:
    """The real `batch_20250821_150540_v4.1/game_00094.json` is, by its own game_id, game 5 of batch
    `batch_20250821_150011_v4.1`, played before this batch started: it must not join this batch's cell, and
    importing both folders must count the game once (the original, valid), whichever folder is read first."""
    home = tmp_path / "batches" / B41
    shutil.copytree(FIXTURES / B41, home)
    other = tmp_path / "batches" / "batch_20250821_120000_v4.1"
    other.mkdir()
    config = json.loads((FIXTURES / B41 / "batch_config.json").read_text())
    config["batch_id"] = other.name
    (other / "batch_config.json").write_text(json.dumps(config, indent=2))
    shutil.copy(home / "game_0001.json", other / "game_00094.json")
    games = {g.provenance.source_file: g for g in read_mini_mafia(tmp_path / "batches")
             if isinstance(g, GameRecord)}
    copied, original = games["batch_20250821_120000_v4.1/game_00094.json"], games[f"{B41}/game_0001.json"]
    assert copied.game_id != original.game_id  # two records, never one overwriting or skipping the other
    assert copied.validity["valid"] is False and copied.validity["reason"] == "game from another batch"
    assert f"names batch '{B41}', not this folder's 'batch_20250821_120000_v4.1'" in copied.validity["details"][0]
    assert original.validity["valid"] is True
    wh = tmp_path / "w.duckdb"
    con = connect(wh)
    try:
        report = run_import("mini-mafia", tmp_path / "batches", con)
        assert report.games_read == 4 and report.skipped == 0
        assert report.invalid.get("game from another batch") == 1
        counted = con.execute("select count(*) from raw_games where valid and game_id in (?, ?)",
                              [original.game_id, copied.game_id]).fetchone()
        assert counted == (1,)  # the marts count valid games only: the game once
    finally:
        con.close()


MISMATCH = Path(__file__).parents[1] / "fixtures" / "datasets" / "mini_mafia_mismatch"


def test_a_game_whose_id_names_a_batch_not_imported_counts_in_its_folders_cell(tmp_path: Path) -> None:
    """The published v4.1 release holds 128 files whose game_id names a batch the release does not hold (the real
    `batch_20250821_150540_v4.1/game_00094.json` says it is game 5 of `batch_20250821_150011_v4.1`); no other file
    holds those games. The reference counts each in its folder's cell, so must we: valid, scored, with the mismatch
    kept as a note and the file's own id in the design (fixtures/datasets/mini_mafia_mismatch/README.md)."""
    games = {g.provenance.source_file: g for g in read_mini_mafia(MISMATCH) if isinstance(g, GameRecord)}
    folder = "batch_20250821_150540_v4.1"
    own, named = games[f"{folder}/game_0000.json"], games[f"{folder}/game_00094.json"]
    assert own.validity == {"valid": True, "reason": None}
    assert named.validity["valid"] is True and named.validity["reason"] is None
    (note,) = named.validity["details"]
    assert note.startswith("note: the file's game_id 'batch_20250821_150011_v4.1_game_0005' names batch "
                           "'batch_20250821_150011_v4.1', not this folder's 'batch_20250821_150540_v4.1'")
    assert named.design is not None and own.design is not None
    assert named.design["source_game_id"] == "batch_20250821_150011_v4.1_game_0005"
    assert "source_game_id" not in own.design
    assert named.game_id == f"mini-mafia-batch-{folder}_game_0094"  # the folder's id: unique per file
    assert named.design["cell"] == own.design["cell"] and named.design["batch_id"] == folder
    con = connect(tmp_path / "w.duckdb")
    try:
        report = run_import("mini-mafia", MISMATCH, con)
        assert (report.games_read, report.landed, report.valid, report.invalid) == (2, 2, 2, {})
        assert con.execute("select count(*), count(*) filter (where winner = 'town') from raw_games "
                           "where valid and batch_id = ? and target_model = 'deepseek/deepseek-chat'",
                           [folder]).fetchone() == (2, 1)
    finally:
        con.close()

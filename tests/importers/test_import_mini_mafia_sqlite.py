"""The Mini-Mafia study's current format, a SQLite database (database/schema.sql): every quirk with expectations
computed by hand from tests/fixtures/datasets/mini_mafia_sqlite/mini_mafia.sql."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb
import pytest

from mafiabench.cli import main
from mafiabench.errors import UserError
from mafiabench.importers.common import UnreadableGame, make_game_id
from mafiabench.importers.mini_mafia_sqlite import read_mini_mafia_sqlite
from mafiabench.record import GameRecord

FIXTURE = Path(__file__).parents[1] / "fixtures" / "datasets" / "mini_mafia_sqlite" / "mini_mafia.sql"
GPT, DEEPSEEK = "openai/gpt-4.1-mini", "deepseek/deepseek-chat"


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "mini_mafia_round2.db"
    con = sqlite3.connect(path)
    con.executescript(FIXTURE.read_text(encoding="utf-8"))
    con.close()
    return path


def games(path: Path) -> dict[str, GameRecord | UnreadableGame]:
    out: dict[str, GameRecord | UnreadableGame] = {}
    for g in read_mini_mafia_sqlite(path):
        out[g.source_file.rsplit("_", 1)[-1] if isinstance(g, UnreadableGame) else g.game_id[-4:]] = g
    return out


def test_a_clean_town_win(database: Path) -> None:
    g = games(database)["0000"]
    assert isinstance(g, GameRecord) and g.validity == {"valid": True, "reason": None}
    assert g.game_id == make_game_id("mini-mafia-sqlite", "20250821_111911_0000")
    assert [(p.seat, p.name, p.role, p.model) for p in g.players] == [
        (None, "Alice", "villager", GPT), (None, "Bob", "mafioso", DEEPSEEK),
        (None, "Charlie", "detective", GPT), (None, "Diana", "villager", GPT)]  # the victim's model: its role's
    assert g.outcome == {"status": "finished", "winner": "town", "reason": "mafioso arrested", "tie_decided": False,
                         "days": 1}
    kinds = [(e.type, e.actor, e.target) for e in g.events if e.type in ("kill", "death", "investigate", "vote",
                                                                          "elimination")]
    assert kinds == [("kill", "Bob", "Alice"), ("death", None, "Alice"), ("investigate", "Charlie", "Bob"),
                     ("vote", "Bob", "Charlie"), ("vote", "Charlie", "Bob"), ("vote", "Diana", "Bob"),
                     ("elimination", None, "Bob")]
    talk = [(e.type, e.actor, e.text, e.truncated, e.format_failure, e.data["discussion_round"])
            for e in g.events if e.type in ("message", "silence")]
    assert talk == [
        ("message", "Diana", "Who had a reason to go after Alice?", False, False, 1),
        ("message", "Charlie", "I checked Bob last night: Bob is the mafioso.", False, False, 1),
        ("silence", "Bob", "Bob remained silent.", False, True, 1),
        ("message", "Bob", "Charlie is lying, I am just a villager and", True, False, 2),
        ("message", "Diana", "Charlie sounds sure.", False, False, 2),
        ("message", "Charlie", "Vote Bob.", False, False, 2)]
    assert next(e for e in g.events if e.type == "elimination").data["votes"] == {"Bob": 2, "Charlie": 1}
    assert g.rules["discussion_rounds"] == 2 and g.rules["mafioso_knows_detective"] is None
    assert g.design is not None
    assert {k: g.design[k] for k in ("experiment", "batch_id", "cell", "capabilities", "target", "background")} == {
        "experiment": "mini_mafia_round2.db", "batch_id": "20250821_111911",
        "cell": f"deceive|{DEEPSEEK}|{GPT}", "capabilities": ["deceive"], "target": DEEPSEEK, "background": GPT}
    assert g.design["benchmark"] == [{"capability": "deceive", "target": "deepseek_v3_1",
                                      "background": "gpt_4_1_mini", "count": 1}]
    # the raw answers stay beside the parsed ones (format-failure audits)
    assert next(e for e in g.events if e.type == "silence").data["raw_response"] == "I think"


def test_a_tie_broken_at_random_and_a_random_vote(database: Path) -> None:
    g = games(database)["0001"]
    assert isinstance(g, GameRecord) and g.validity["valid"] is True
    assert g.outcome["winner"] == "mafia" and g.outcome["tie_decided"] is True
    elimination = next(e for e in g.events if e.type == "elimination")
    assert elimination.target == "Charlie" and elimination.tie_break
    assert elimination.data["votes"] == {"Diana": 1, "Alice": 1, "Charlie": 1}
    flagged = [(e.actor, e.format_failure, e.random_fallback) for e in g.events if e.type == "vote"]
    assert flagged == [("Alice", False, False), ("Charlie", False, False), ("Diana", True, True)]
    assert g.rules["discussion_rounds"] == 1


def test_a_random_vote_marked_in_game_sequence_alone(database: Path) -> None:
    """The study's code logs a vote cast at random after a failed format as `"<name> (random)"` (src/agents.py); a
    database without the votes table says so there only: the same game, the same random vote."""
    con = sqlite3.connect(database)
    con.execute("update game_sequence set parsed_result = 'Charlie (random)' where game_id = '20250821_111911_0001' "
                "and step = 8")
    con.execute("delete from votes where game_id = '20250821_111911_0001'")
    con.commit()
    con.close()
    g = games(database)["0001"]
    assert isinstance(g, GameRecord) and g.validity["valid"] is True
    assert next(e for e in g.events if e.type == "elimination").data["votes"] == {"Diana": 1, "Alice": 1, "Charlie": 1}
    flagged = [(e.actor, e.target, e.format_failure, e.random_fallback) for e in g.events if e.type == "vote"]
    assert flagged == [("Alice", "Diana", False, False), ("Charlie", "Alice", False, False),
                       ("Diana", "Charlie", True, True)]


def test_a_person_is_the_model_human_as_in_every_importer(database: Path) -> None:
    """A `players` row of type 'human' is the model `human` (the web game's, Dallinger's and LLMafia's people are),
    its agent `human/player`: one person-model across the study's databases."""
    con = sqlite3.connect(database)
    con.execute("update game_players set player_id = 3 where game_id = '20250821_111911_0000' and character_name = "
                "'Charlie'")
    con.commit()
    con.close()
    g = games(database)["0000"]
    assert isinstance(g, GameRecord)
    charlie = next(p for p in g.players if p.name == "Charlie")
    assert (charlie.role, charlie.agent, charlie.model, charlie.model_raw) == ("detective", "human/player", "human",
                                                                              "human")
    assert g.design is not None and g.design["cell"] == f"mixed|mafioso={DEEPSEEK};detective=human;villager={GPT}"


@pytest.mark.parametrize(("game", "was_tie", "valid"), [
    ("0001", 0, True),  # a three-way tie, was_tie at its default: the study's runners never write the column
    ("0001", 1, True),
    ("0000", 1, False),  # a true was_tie was written by someone: it must be a tie
    ("0000", 0, True),
])
def test_was_tie_counts_only_when_true(database: Path, game: str, was_tie: int, valid: bool) -> None:
    """`db_utils.insert_game` never sets `games.was_tie` (schema.sql's default false): every real batch database
    reads false there whatever the votes (mini_mafia_short_prompt.db: 13 of 160 games were three-way ties)."""
    con = sqlite3.connect(database)
    con.execute("update games set was_tie = ? where game_id = ?", [was_tie, f"20250821_111911_{game}"])
    con.commit()
    con.close()
    g = games(database)[game]
    assert isinstance(g, GameRecord) and g.validity["valid"] is valid, g.validity
    if not valid:
        assert g.validity["details"] == ["games.was_tie is True, but the votes {'Charlie': 1, 'Bob': 2} are not a tie"]


def test_tables_that_disagree_land_invalid_with_the_reason(database: Path) -> None:
    g = games(database)["0002"]
    assert isinstance(g, GameRecord)
    assert g.validity["valid"] is False and g.validity["reason"] == "inconsistent tables"
    assert any("games.winner is town, but Charlie (the villager) was arrested" in d for d in g.validity["details"])
    assert g.outcome["winner"] == "mafia"  # what the arrest says, not the contradicting column


def test_a_game_without_players_is_listed_unreadable(database: Path) -> None:
    g = games(database)["0003"]
    assert isinstance(g, UnreadableGame)
    assert g.reason == "mini_mafia_round2.db#20250821_111911_0003: no rows in game_players"


def test_not_a_database_and_missing_tables_are_named(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(UserError, match=r"junk\.db: not a readable SQLite database"):
        list(read_mini_mafia_sqlite(junk))
    other = tmp_path / "other.db"
    sqlite3.connect(other).executescript("create table games (game_id text);")
    with pytest.raises(UserError, match=r"other.db: not a Mini-Mafia database: table\(s\) game_players, game_sequence"):
        list(read_mini_mafia_sqlite(other))


def test_the_import_command_lands_the_study_once(database: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    wh = tmp_path / "w.duckdb"
    assert main(["import", "mini-mafia-sqlite", str(database), "--warehouse", str(wh)]) == 0
    out = capsys.readouterr().out
    assert "4 games read" in out and ": 3 landed, 0 already present, 2 valid," in out
    assert "study mini_mafia_round2.db: 3 games" in out and "1 unreadable (not landed)" in out
    assert main(["import", "mini-mafia-sqlite", str(database), "--warehouse", str(wh), "-v"]) == 0
    assert "skipped (already in the warehouse): 3" in capsys.readouterr().out
    con = duckdb.connect(str(wh), read_only=True)
    try:
        rows = con.execute(
            "select experiment, cell, winner, valid, batch_id from raw_games order by game_id").fetchall()
        seats = con.execute("select count(*) from raw_players where seat is not null").fetchone()
    finally:
        con.close()
    assert rows == [
        ("mini_mafia_round2.db", f"deceive|{DEEPSEEK}|{GPT}", "town", True, "20250821_111911"),
        ("mini_mafia_round2.db", f"deceive|{DEEPSEEK}|{GPT}", "mafia", True, "20250821_111911"),
        ("mini_mafia_round2.db", f"deceive|{DEEPSEEK}|{GPT}", "mafia", False, "20250821_111911")]
    assert seats == (0,)


def test_raw_answers_are_read_again_with_our_reference_parser(database: Path) -> None:
    """Format failures of the two readings, answer by answer: ours agrees with the reference's on every answer of
    the fixture except the one planted in game 0002 (raw `Alice`, recorded as a vote for Diana)."""
    got = {k: [(e.type, e.actor, e.data.get("reparsed"), e.data.get("parse_agrees")) for e in g.events
               if "raw_response" in e.data]
           for k, g in games(database).items() if isinstance(g, GameRecord)}
    assert got["0000"] == [
        ("message", "Diana", "Who had a reason to go after Alice?", True),  # reasoning after the first line dropped
        ("message", "Charlie", "I checked Bob last night: Bob is the mafioso.", True),
        ("silence", "Bob", "remained silent", True),  # `I think`: no quoted message
        ("message", "Bob", "Charlie is lying, I am just a villager and...", True),  # unclosed quote: the marker
        ("message", "Diana", "Charlie sounds sure.", True),
        ("message", "Charlie", "Vote Bob.", True),
        ("vote", "Bob", "Charlie", True), ("vote", "Charlie", "Bob", True), ("vote", "Diana", "Bob", True)]
    assert got["0001"] == [
        ("message", "Alice", "Diana is the mafioso.", True),
        ("message", "Diana", "Alice is bluffing.", True),  # a <think> block stripped
        ("message", "Charlie", "Hard to say.", True),
        ("vote", "Alice", "Diana", True),
        ("vote", "Charlie", "Alice", True),  # `I would arrest Alice`: a valid name later in the answer
        ("vote", "Diana", None, True)]  # no name: both readings fall back to a random vote
    assert [x for x in got["0002"] if x[3] is not True] == [("vote", "Charlie", "Alice", False)]


def test_a_database_and_a_folder_of_the_same_name_are_two_studies(tmp_path: Path) -> None:
    """`database/mini_mafia.db` and a folder of batches named `mini_mafia` both defaulted to study `mini_mafia`
    and merged into one study (issue 31 item 12): each format's default now differs."""
    from mafiabench.importers.common import run_import
    from mafiabench.warehouse.raw import connect

    db = tmp_path / "mini_mafia.db"
    sqlite3.connect(db).executescript(FIXTURE.read_text(encoding="utf-8"))
    folder = Path(__file__).parents[1] / "fixtures" / "datasets" / "mini_mafia"
    con = connect(tmp_path / "w.duckdb")
    try:
        from_db = run_import("mini-mafia-sqlite", db, con)
        from_folder = run_import("mini-mafia", folder, con)
        studies = con.execute("select experiment, count(*) from raw_games group by all order by 1").fetchall()
    finally:
        con.close()
    assert set(from_db.studies) == {"mini_mafia.db"} and set(from_folder.studies) == {"mini_mafia"}
    assert studies == [("mini_mafia", 7), ("mini_mafia.db", 3)]

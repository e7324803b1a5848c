"""LLMafia game folders: clocks past midnight, stray backspaces, repeated speaker prefixes, aborted games, mafia
night chat, model players from config.json, and idempotent landing. Fixtures: 0001 a full game with an LLM
mafioso (mafia wins), 0002 aborted, 0003 a single mafioso (town wins), 0004 unreadable, 0005 anonymous voting with
the tally in the day chat (the shape of niveck/LLMafia games/0002), 0006 anonymous voting with a multi-line tally in
the manager chat, no player_names.txt and no who_wins.txt (the shape of games/0006)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mafiabench.importers import UnreadableGame, read_llmafia, run_import
from mafiabench.importers.common import apply_backspaces, strip_speaker_prefix
from mafiabench.record import GameRecord
from mafiabench.warehouse.raw import connect

FIXTURES = Path(__file__).parents[1] / "fixtures" / "datasets" / "llmafia"


@pytest.fixture(scope="module")
def items() -> dict[str, GameRecord | UnreadableGame]:
    return {(it.source_file if isinstance(it, UnreadableGame) else str(it.provenance.source_file)): it
            for it in read_llmafia(FIXTURES)}


def game(items: dict[str, GameRecord | UnreadableGame], name: str) -> GameRecord:
    it = items[name]
    assert isinstance(it, GameRecord), it
    return it


def test_text_clean_up() -> None:
    assert apply_backspaces("i thinl\bk so") == "i think so"
    assert apply_backspaces("\bhi\b\b\bok") == "ok"
    assert strip_speaker_prefix("Sam: sam: i vote kennedy", "Sam") == "i vote kennedy"
    assert strip_speaker_prefix("sam here, hi", "Sam") == "sam here, hi"
    assert strip_speaker_prefix("Sam:", "Sam") == "Sam:"  # nothing would be left: keep it


def test_full_game(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, "0001")
    assert g.variant == "async" and g.game_id.startswith("llmafia-0001-")
    assert g.rules == {"n_players": 7, "n_mafia": 2, "start": "day", "night_chat": True, "reveal_role": True,
                       "day_seconds": 120, "night_seconds": 30}
    agents = {p.name: (p.role, p.agent, p.model, p.model_raw) for p in g.players}
    assert agents["Casey"] == ("mafioso", "together/llama-3.3-70b-instruct-turbo",
                               "together/llama-3.3-70b-instruct-turbo", "meta-llama/Llama-3.3-70B-Instruct-Turbo")
    assert agents["Frankie"] == ("mafioso", "human/participant", "human", None)
    assert "Participant" not in g.to_json()  # real names in config.json never reach the record
    talk = [(e.phase, e.round, e.type, e.actor, e.text, e.visibility, e.data["clock"]) for e in g.events
            if e.type in ("message", "mafia_message")]
    assert talk == [
        ("day", 1, "message", "Alex", "hi all", "public", "00:00:10"),
        ("day", 1, "message", "Casey", "hey everyone, anyone suspicious?", "public", "00:00:15"),
        ("day", 1, "message", "Blake", "i think drew is quiet", "public", "00:00:29"),
        ("day", 1, "message", "Drew", "i'm here!", "public", "00:00:40"),
        ("night", 1, "mafia_message", "Casey", "let's get alex", "team:mafia", "00:02:20"),  # past midnight
        ("night", 1, "mafia_message", "Frankie", "ok", "team:mafia", "00:02:25"),
        ("day", 2, "message", "Gray", "casey voted drew fast", "public", "00:03:00"),
        ("day", 2, "message", "Casey", "i just followed the group", "public", "00:03:10"),
    ]
    raw = {e.actor: e.data.get("raw_text") for e in g.events if e.type == "message" and e.round == 1}
    assert raw == {"Alex": None, "Casey": "Casey: hey everyone, anyone suspicious?",
                   "Blake": "i thinl\bk drew is quiet", "Drew": None}
    votes = [(e.phase, e.round, e.actor, e.target, e.visibility, e.data.get("kind")) for e in g.events
             if e.type == "vote"]
    assert votes[:2] == [("day", 1, "Alex", "Drew", "public", None), ("day", 1, "Blake", "Drew", "public", None)]
    assert ("night", 1, "Casey", "Alex", "team:mafia", "night_proposal") in votes
    assert len(votes) == 7 + 2 + 5
    outs = [(e.phase, e.round, e.type, e.actor, e.target, e.data.get("role"), e.data.get("votes"))
            for e in g.events if e.type in ("elimination", "kill", "death")]
    assert outs == [
        ("day", 1, "elimination", None, "Drew", "bystander", {"Drew": 4, "Casey": 2, "Blake": 1}),
        ("night", 1, "kill", "mafia", "Alex", None, None),
        ("night", 1, "death", None, "Alex", "bystander", {"Alex": 2}),
        ("day", 2, "elimination", None, "Gray", "bystander", {"Gray": 3, "Casey": 2}),
    ]
    phases = [(e.phase, e.round, e.data["clock"]) for e in g.events if e.type == "phase_start"]
    assert phases == [("day", 1, "00:00:00"), ("night", 1, "00:02:11"), ("day", 2, "00:02:46")]
    assert g.outcome == {"status": "finished", "winner": "mafia", "reason": "mafia reached parity",
                         "tie_decided": False, "days": 2}
    assert g.validity == {"valid": True, "reason": None}
    assert g.design is not None and g.design["target"] == "together/llama-3.3-70b-instruct-turbo"
    assert g.events[-1].type == "game_end" and g.events[-1].data["winner"] == "mafia"


def test_aborted_game(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, "0002")
    assert g.validity == {"valid": False, "reason": "aborted"}
    assert g.outcome == {"status": "unfinished", "winner": None, "reason": "aborted", "tie_decided": False,
                         "days": 1}
    assert [e.type for e in g.events if e.phase != "setup"] == [
        "phase_start", "message", "message", "no_elimination", "game_end"]
    assert {p.agent for p in g.players} == {"unknown/participant"}  # no config.json


def test_single_mafioso_and_continued_line(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, "0003")
    morgan = next(e for e in g.events if e.type == "message" and e.actor == "Morgan")
    assert morgan.text == "no idea, noah asks a lot\nthat is all i have"
    night = [(e.type, e.actor, e.target, e.visibility) for e in g.events if e.phase == "night"]
    assert night == [
        ("phase_start", None, None, "public"),
        ("info", None, None, "public"),  # "cutting straight to voting" from the public manager chat
        ("info", None, None, "team:mafia"),  # "Nighttime has ended" from the mafia's chat
        ("vote", "Morgan", "Kai", "team:mafia"),
        ("kill", "Morgan", "Kai", "team:mafia"),
        ("death", None, "Kai", "public"),
    ]
    last = [e for e in g.events if e.type == "elimination"][-1]
    assert (last.target, last.data["role"], last.data["mafia_left"]) == ("Morgan", "mafioso", 0)
    assert g.outcome["winner"] == "town" and g.outcome["days"] == 2
    assert g.validity["valid"] is True


def test_unreadable_folder_names_file_and_values(items: dict[str, GameRecord | UnreadableGame]) -> None:
    bad = items["0004"]
    assert isinstance(bad, UnreadableGame)
    assert bad.reason == "0004/mafia_names.txt: ['Riley'] not in player_names.txt ['Quinn', 'Ray', 'Reese']"


def test_game_id_does_not_depend_on_where_it_is_read_from(items: dict[str, GameRecord | UnreadableGame]) -> None:
    (one,) = read_llmafia(FIXTURES / "0001")
    assert isinstance(one, GameRecord)
    assert one.game_id == game(items, "0001").game_id and one.provenance.source_file == "0001"


def test_import_twice_lands_once(tmp_path: Path) -> None:
    con = connect(tmp_path / "w.duckdb")
    first = run_import("llmafia", FIXTURES, con)
    assert (first.games_read, first.landed, first.valid, first.invalid) == (6, 5, 3, {"aborted": 2})
    assert first.unreadable == [("0004", "0004/mafia_names.txt: ['Riley'] not in player_names.txt "
                                         "['Quinn', 'Ray', 'Reese']")]
    second = run_import("llmafia", FIXTURES, con)
    assert (second.landed, second.skipped) == (0, 5)
    rows = con.execute("select source, count(*), sum(days) from raw_games group by source").fetchall()
    assert rows == [("llmafia", 5, 8)]  # 0005: 2 days, 0006: 1
    msgs = con.execute("select count(*) from raw_events where type in ('message', 'mafia_message')").fetchone()
    assert msgs == (21,)  # 13 in 0001-0003, 5 in 0005, 3 in 0006
    con.close()


def test_anonymous_votes_in_the_day_chat(items: dict[str, GameRecord | UnreadableGame]) -> None:
    """The tally logged the second day 2 starts belongs to day 1's vote; no voter is named, so no vote event."""
    g = game(items, "0005")
    rows = [(e.phase, e.round, e.type, e.target, e.text) for e in g.events
            if e.type in ("phase_start", "info", "elimination")]
    assert rows == [
        ("day", 1, "phase_start", None, "Day 1 begins."),
        ("day", 1, "info", None, "Discussion phase has ended, now it's time to vote! Who do you think is the AI? "
                                 "Waiting for all players to vote..."),
        ("day", 1, "info", None, "Voting results:"),
        ("day", 1, "info", None, "Dale: 0 votes"),
        ("day", 1, "info", None, "Hollis: 3 votes"),
        ("day", 1, "info", None, "Lane: 1 vote"),
        ("day", 1, "info", None, "Ren: 0 votes"),
        ("day", 1, "elimination", "Hollis", "Hollis was eliminated; they were bystander."),
        ("day", 2, "phase_start", None, "Day 2 begins."),
        ("day", 2, "info", None, "Discussion phase has ended, now it's time to vote! Who do you think is the AI? "
                                 "Waiting for all players to vote..."),
        ("day", 2, "info", None, "Voting results:"),
        ("day", 2, "info", None, "Dale: 1 vote"),
        ("day", 2, "info", None, "Lane: 0 votes"),
        ("day", 2, "info", None, "Ren: 2 votes"),
        ("day", 2, "elimination", "Ren", "Ren was eliminated; they were mafioso."),
    ]
    assert not [e for e in g.events if e.type == "vote"]
    tallies = [e.data["votes"] for e in g.events if e.type == "elimination"]
    assert tallies == [{"Hollis": 3, "Lane": 1}, {"Dale": 1, "Ren": 2}]
    assert g.outcome == {"status": "finished", "winner": "town", "reason": "no mafia left", "tie_decided": False,
                         "days": 2}
    assert g.validity == {"valid": True, "reason": None}
    assert {p.name: p.model for p in g.players}["Ren"] == "together/llama-3.3-70b-instruct-turbo"


def test_anonymous_tally_in_the_manager_chat(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, "0006")
    assert [p.name for p in g.players] == ["Bex", "Hart", "Kit", "Pim"]  # from config.json
    elimination = next(e for e in g.events if e.type == "elimination")
    assert elimination.target == "Hart" and elimination.data["votes"] == {"Hart": 2, "Pim": 1}
    assert g.outcome["status"] == "unfinished" and g.validity["reason"] == "aborted"  # no who_wins.txt

"""Dallinger human games (Ibraheem et al. 2022): every quirk of the export, the study's validity rule, and
idempotent landing. Fixture folders: A valid 5-player game (unsorted rows, repeated phase changes, `failed`
messages, a changed vote), B a dropout, C no winner recorded, D a night without votes, E and F unreadable, G a
valid game with a message and a vote from the night victim (flagged, counted by no tally)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from mafiabench.importers import UnreadableGame, read_dallinger, run_import
from mafiabench.record import GameRecord
from mafiabench.warehouse.raw import connect

FIXTURES = Path(__file__).parent / "fixtures" / "datasets" / "dallinger"
A = "a1b2c3d4e5f60718293a4b5c6d7e8f90-data"
B = "b2c3d4e5f60718293a4b5c6d7e8f90a1-data"
C = "c3d4e5f60718293a4b5c6d7e8f90a1b2-data"
D = "d4e5f60718293a4b5c6d7e8f90a1b2c3-data"
G = "0a1b2c3d4e5f60718293a4b5c6d7e8f9-data"


@pytest.fixture(scope="module")
def items() -> dict[str, GameRecord | UnreadableGame]:
    return {(it.source_file if isinstance(it, UnreadableGame) else str(it.provenance.source_file)): it
            for it in read_dallinger(FIXTURES)}


def game(items: dict[str, GameRecord | UnreadableGame], name: str) -> GameRecord:
    it = items[name]
    assert isinstance(it, GameRecord), it
    return it


def test_valid_five_player_game(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, A)
    assert g.game_id == "ibraheem2022-human-a1b2c3d4e5f60718293a4b5c6d7e8f90"
    assert g.variant == "async"
    assert g.rules == {"n_players": 5, "n_mafia": 1, "start": "night", "night_chat": True, "reveal_role": True}
    assert [(p.seat, p.name, p.role, p.agent, p.model) for p in g.players][:2] == [
        (0, "Ann Lee", "bystander", "human/participant", "human"),
        (1, "Bo Chen", "mafioso", "human/participant", "human")]
    rows = [(e.phase, e.round, e.type, e.actor, e.target, e.visibility, e.text) for e in g.events
            if e.type not in ("game_start", "role_assigned")]
    assert rows == [
        # the three "Phase Change to Nighttime" rows are one phase: the first starts it, the two repeats are kept as
        # flagged info events; rows come sorted by time then id
        ("night", 1, "phase_start", None, None, "public", "Night 1 begins."),
        ("night", 1, "info", None, None, "public", "Phase Change to Nighttime"),
        ("night", 1, "info", None, None, "public", "Phase Change to Nighttime"),
        ("night", 1, "mafia_message", "Bo Chen", None, "team:mafia", "I'll take Ann."),  # failed=t: kept
        ("night", 1, "vote", "Bo Chen", "Ann Lee", "team:mafia", None),
        ("night", 1, "kill", "Bo Chen", "Ann Lee", "team:mafia", "You killed Ann Lee."),
        ("night", 1, "death", None, "Ann Lee", "public", "Ann Lee was found dead."),
        ("day", 1, "phase_start", None, None, "public", "Day 1 begins."),
        ("day", 1, "info", None, None, "public", "Phase Change to Daytime: Victim - Ann Lee"),  # repeat of id 15
        ("day", 1, "message", "Cy Diaz", None, "public", "Who killed Ann?"),
        ("day", 1, "message", "Bo Chen", None, "public", "Not me. Maybe Ed."),
        ("day", 1, "message", "Ed Fox", None, "public", "Bo: you were quick to blame me."),
        ("day", 1, "vote", "Cy Diaz", "Bo Chen", "public", None),  # the vote that counted
        ("day", 1, "vote", "Di Eze", "Bo Chen", "public", None),  # same second as Ed's: id order
        ("day", 1, "vote", "Ed Fox", "Bo Chen", "public", None),
        ("day", 1, "vote", "Bo Chen", "Ed Fox", "public", None),
        ("day", 1, "elimination", None, "Bo Chen", "public", "Bo Chen was eliminated; they were mafioso."),
        ("end", 1, "game_end", None, None, "public", None),
    ]
    by_type = {e.type: e for e in g.events}
    flagged = [(e.seq, e.data["flag"]) for e in g.events if "flag" in e.data]
    assert flagged == [(7, "repeated_phase_change"), (8, "repeated_phase_change"), (14, "repeated_phase_change")]
    night_vote = g.events[10]
    assert night_vote.data == {"clock": "00:00:39", "time": "2021-03-05 20:00:40.000000", "kind": "night_proposal"}
    cy = next(e for e in g.events if e.type == "vote" and e.actor == "Cy Diaz")
    assert cy.data["previous"] == [{"target": "Ed Fox", "clock": "00:01:49"}]
    assert by_type["death"].data["votes"] == {"Ann Lee": 1} and by_type["death"].data["role"] == "bystander"
    assert by_type["elimination"].data["votes"] == {"Bo Chen": 3, "Ed Fox": 1}
    assert by_type["elimination"].data["role_revealed"] is True and not by_type["elimination"].tie_break
    first = next(e for e in g.events if e.type == "message")
    assert first.data == {"clock": "00:01:09", "time": "2021-03-05 20:01:10.000000"}  # since the first row
    assert g.outcome == {"status": "finished", "winner": "town", "reason": "no mafia left", "tie_decided": False,
                         "days": 1}
    assert g.validity == {"valid": True, "reason": None}
    files = sorted((FIXTURES / A).iterdir(), key=lambda p: p.name)
    assert g.provenance.source_sha256 == hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()
    assert g.provenance.source == "ibraheem2022-human"


def test_votes_and_messages_after_elimination_are_flagged_not_counted(items: dict[str, GameRecord | UnreadableGame]
                                                                     ) -> None:
    """Ivy Moss, killed at night, still chats and votes by day: both land flagged, the tally is Jo's and Kim's
    votes for Gil against Gil's for Jo (2-1), and the game stays valid (nothing a player can be blamed for)."""
    g = game(items, G)
    rows = [(e.phase, e.type, e.actor, e.target, e.data.get("flag")) for e in g.events
            if e.type not in ("game_start", "role_assigned")]
    assert rows == [
        ("night", "phase_start", None, None, None),
        ("night", "mafia_message", "Gil Hart", None, None),
        ("night", "vote", "Gil Hart", "Ivy Moss", None),
        ("night", "kill", "Gil Hart", "Ivy Moss", None),
        ("night", "death", None, "Ivy Moss", None),
        ("day", "phase_start", None, None, None),
        ("day", "message", "Ivy Moss", None, "message_after_elimination"),
        ("day", "message", "Jo Park", None, None),
        ("day", "vote", "Ivy Moss", "Gil Hart", "vote_after_elimination"),
        ("day", "vote", "Jo Park", "Gil Hart", None),
        ("day", "vote", "Kim Roy", "Gil Hart", None),
        ("day", "vote", "Gil Hart", "Jo Park", None),
        ("day", "elimination", None, "Gil Hart", None),
        ("end", "game_end", None, None, None),
    ]
    ivy_vote = next(e for e in g.events if e.type == "vote" and e.actor == "Ivy Moss")
    assert ivy_vote.data["counted"] is False
    elimination = next(e for e in g.events if e.type == "elimination")
    assert elimination.data["votes"] == {"Gil Hart": 2, "Jo Park": 1}
    assert g.outcome == {"status": "finished", "winner": "town", "reason": "no mafia left", "tie_decided": False,
                         "days": 1}
    assert g.validity == {"valid": True, "reason": None}


def test_flagged_events_pass_the_gate_and_no_tally_counts_them(tmp_path: Path) -> None:
    from mafiabench.publish import build_warehouse

    con = connect(tmp_path / "w.duckdb")
    report = run_import("dallinger", FIXTURES / G, con)
    assert report.flags == {"message_after_elimination": 1, "vote_after_elimination": 1}
    assert "flagged events (landed, counted by no tally): 2" in report.to_text()
    build_warehouse(con)
    votes = con.execute("select voter, target from int_votes where vote_kind = 'day' order by seq").fetchall()
    assert votes == [("Jo Park", "Gil Hart"), ("Kim Roy", "Gil Hart"), ("Gil Hart", "Jo Park")]
    speakers = con.execute("select speaker from int_turns order by seq").fetchall()
    assert speakers == [("Jo Park",)]
    # The gate ran the dbt test of the rule (votes only by and for active players) on these games, and it passed.
    rule = con.execute("select success, element_count from validation_results "
                       "where expectation = 'assert_votes_by_active_players'").fetchall()
    assert rule == [(True, 0)]
    con.close()


def test_dropout_is_a_technical_failure(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, B)
    drop = [e for e in g.events if e.type == "info" and e.data.get("kind") == "dropout"]
    assert [(e.phase, e.round, e.actor) for e in drop] == [("day", 1, "Ivy Jo")]
    assert g.validity == {"valid": False, "reason": "technical failure", "details": ["Ivy Jo dropped out of the game"]}
    assert g.outcome["winner"] == "mafia" and g.outcome["reason"] == "mafia reached parity"


def test_no_winner_recorded(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, C)
    assert g.validity["reason"] == "no winner recorded"
    assert g.outcome == {"status": "unfinished", "winner": None, "reason": "no winner recorded",
                         "tie_decided": False, "days": 1}
    night2 = [e for e in g.events if e.phase == "night" and e.round == 2]
    assert [e.type for e in night2] == ["phase_start", "mafia_message"]
    assert night2[0].data["after_game_over"] is True


def test_phase_without_votes(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, D)
    none = [e for e in g.events if e.type == "no_elimination"]
    assert [(e.phase, e.round, e.data["reason"]) for e in none] == [("night", 1, "no votes cast")]
    assert g.validity == {"valid": False, "reason": "no votes cast", "details": ["no votes cast in night 1"]}
    assert g.outcome["winner"] == "town" and g.outcome["days"] == 1


def test_unreadable_folders_are_reported(items: dict[str, GameRecord | UnreadableGame]) -> None:
    bad = {k: v.reason for k, v in items.items() if isinstance(v, UnreadableGame)}
    assert bad == {
        "e5f60718293a4b5c6d7e8f90a1b2c3d4-data": "e5f60718293a4b5c6d7e8f90a1b2c3d4-data/node.csv row id=2: field "
                                                  "type must be source, mafioso or bystander, got 'wizard'",
        "f60718293a4b5c6d7e8f90a1b2c3d4e5-data": "f60718293a4b5c6d7e8f90a1b2c3d4e5-data: info.csv missing",
    }


def test_one_game_folder_keeps_its_name_and_id(items: dict[str, GameRecord | UnreadableGame]) -> None:
    (one,) = read_dallinger(FIXTURES / A)
    assert isinstance(one, GameRecord)
    assert one.provenance.source_file == A and one.game_id == game(items, A).game_id


def test_import_twice_lands_once(tmp_path: Path) -> None:
    con = connect(tmp_path / "w.duckdb")
    first = run_import("dallinger", FIXTURES, con)
    assert (first.games_read, first.landed, first.valid, len(first.unreadable)) == (7, 5, 2, 2)
    assert first.invalid == {"technical failure": 1, "no winner recorded": 1, "no votes cast": 1}
    assert first.flags == {"message_after_elimination": 1, "repeated_phase_change": 3, "vote_after_elimination": 1}
    events = con.execute("select count(*) from raw_events").fetchone()
    second = run_import("dallinger", FIXTURES, con)
    assert (second.landed, second.skipped) == (0, 5)
    assert con.execute("select count(*) from raw_events").fetchone() == events
    assert con.execute("select count(*), count(distinct game_id) from raw_games").fetchone() == (5, 5)
    con.close()

"""Dallinger human games (Ibraheem et al. 2022): every quirk of the export, the study's validity rules, and
idempotent landing. Fixture folders: A a 5-player game (unsorted rows, repeated phase changes, `failed` messages, a
changed vote) whose only defect is being outside the study's protocol (5 players, 1 mafioso), B a dropout, C no
winner recorded, D a night without votes, E and F unreadable, G a 4-player game with a message and a vote from the
night victim (flagged, counted by no tally), H a valid 9-player game in the shape of the real ones (a dropout voted
out in the same phase, a node failing after the end, a node let in after the end; README.md)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from mafiabench.importers import UnreadableGame, read_dallinger, run_import
from mafiabench.record import GameRecord
from mafiabench.warehouse.raw import connect

FIXTURES = Path(__file__).parents[1] / "fixtures" / "datasets" / "dallinger"
A = "a1b2c3d4e5f60718293a4b5c6d7e8f90-data"
B = "b2c3d4e5f60718293a4b5c6d7e8f90a1-data"
C = "c3d4e5f60718293a4b5c6d7e8f90a1b2-data"
D = "d4e5f60718293a4b5c6d7e8f90a1b2c3-data"
G = "0a1b2c3d4e5f60718293a4b5c6d7e8f9-data"
H = "4c5d6e7f-8091-a2b3-c4d5-e6f708192a3b-data"


@pytest.fixture(scope="module")
def items() -> dict[str, GameRecord | UnreadableGame]:
    return {(it.source_file if isinstance(it, UnreadableGame) else str(it.provenance.source_file)): it
            for it in read_dallinger(FIXTURES)}


def game(items: dict[str, GameRecord | UnreadableGame], name: str) -> GameRecord:
    it = items[name]
    assert isinstance(it, GameRecord), it
    return it


def test_five_player_game_is_read_whole_and_only_outside_the_protocol(
        items: dict[str, GameRecord | UnreadableGame]) -> None:
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
    assert g.validity == {"valid": False, "reason": "outside the study's protocol",
                          "details": ["5 players and 1 mafioso (the study's games have 7-12 players and 2 mafiosos)"]}
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
    assert g.validity["reason"] == "outside the study's protocol" and len(g.validity["details"]) == 1


def test_flagged_events_pass_the_gate_and_no_tally_counts_them(tmp_path: Path) -> None:
    """On the valid real-shaped game H: the night victim's day message and vote, a dropout voted out in the same
    phase and repeated phase changes land flagged; the gate's rule (votes only by and for active players) holds."""
    from mafiabench.publish import build_warehouse

    con = connect(tmp_path / "w.duckdb")
    report = run_import("dallinger", FIXTURES / H, con)
    assert report.valid == 1
    assert report.flags == {"dropout_before_elimination": 1, "message_after_elimination": 1,
                            "repeated_phase_change": 4, "vote_after_elimination": 1}
    assert "flagged events (landed, counted by no tally): 7" in report.to_text()
    build_warehouse(con)
    votes = con.execute("select voter, target from int_votes where vote_kind = 'day' and round = 1 order by seq"
                        ).fetchall()
    assert ("Ada Bell", "Omar Quist") not in votes and len(votes) == 7
    assert votes.count(("Ben Cole", "Dev Eng")) == 1  # a vote for the player who had dropped out counts
    speakers = {s for (s,) in con.execute("select distinct speaker from int_turns").fetchall()}
    assert "Ada Bell" not in speakers and "Ben Cole" in speakers
    # The rule (votes only by and for active players) found nothing in this valid game: the flagged vote counts in
    # no tally, so it is not even a fact of the dataset (mart_dataset_observations).
    assert con.execute("select count(*) from int_play_observations").fetchall() == [(0,)]
    con.close()


def test_real_shaped_game_follows_the_rules_a_person_would_accept(items: dict[str, GameRecord | UnreadableGame]
                                                                  ) -> None:
    """H (9 players, 2 mafia): Dev Eng's node fails in day 1 and he is voted out in day 1 anyway (a flag, not a
    dropout: the votes cast against him after he left count), Cleo Diaz's node fails after the game ended (no
    dropout), Ivan Joy is let in after the end (not a player). Valid, mafia win on the night-3 kill."""
    g = game(items, H)
    assert g.validity == {"valid": True, "reason": None, "notes": [
        "Ivan Joy joined after the game had ended: not a player",
        "Cleo Diaz's node failed after the game had ended: not a dropout",
        "Dev Eng dropped out in day 1 and was eliminated in that phase anyway: play did not change"]}
    assert [p.name for p in g.players] == ["Nora Vance", "Omar Quist", "Ada Bell", "Ben Cole", "Cleo Diaz",
                                           "Dev Eng", "Eli Ford", "Fay Gold", "Gus Hale"]
    assert g.rules["n_players"] == 9 and g.rules["n_mafia"] == 2
    drop = next(e for e in g.events if e.data.get("kind") == "dropout")
    assert (drop.phase, drop.round, drop.actor) == ("day", 1, "Dev Eng")
    assert drop.data["flag"] == "dropout_before_elimination"
    outs = [(e.phase, e.round, e.target, e.data["votes"]) for e in g.events if e.type in ("elimination", "death")]
    assert outs == [("night", 1, "Ada Bell", {"Ada Bell": 2}),
                    ("day", 1, "Dev Eng", {"Dev Eng": 4, "Cleo Diaz": 3}),  # 3 of Dev's 4 votes came after he left
                    ("night", 2, "Fay Gold", {"Fay Gold": 2}),
                    ("day", 2, "Gus Hale", {"Gus Hale": 4, "Omar Quist": 2}),
                    ("night", 3, "Ben Cole", {"Ben Cole": 2})]
    assert g.outcome == {"status": "finished", "winner": "mafia", "reason": "mafia reached parity",
                         "tie_decided": False, "days": 2}


def _mutated(tmp_path: Path, edit: dict[str, tuple[str, str]]) -> GameRecord:
    folder = tmp_path / H
    shutil.copytree(FIXTURES / H, folder)
    for name, (old, new) in edit.items():
        text = (folder / name).read_text()
        assert old in text, (name, old)
        (folder / name).write_text(text.replace(old, new))
    (record,) = read_dallinger(folder)
    assert isinstance(record, GameRecord), record
    return record


@pytest.mark.parametrize(("edit", "details"), [
    # fb8339cf-shaped: the node fails in night 1, he is voted out in day 1 (absent all day): play changed
    ({"node.csv": ("t,2019-05-10 18:01:41.500000", "t,2019-05-10 18:00:30.000000")},
     ["Dev Eng dropped out of the game in night 1"]),
    # c3976b22-shaped: a node fails before the end and the player is never eliminated
    ({"node.csv": ("t,2019-05-10 18:28:20.000000", "t,2019-05-10 18:06:40.000000")},
     ["Cleo Diaz dropped out of the game in day 2"]),
])
def test_a_dropout_that_changed_play_is_a_technical_failure_and_votes_against_the_absent_count(
        tmp_path: Path, edit: dict[str, tuple[str, str]], details: list[str]) -> None:
    g = _mutated(tmp_path, edit)
    assert {k: v for k, v in g.validity.items() if k != "notes"} == {"valid": False, "reason": "technical failure",
                                                                     "details": details}
    day1 = next(e for e in g.events if e.type == "elimination" and e.round == 1)
    assert (day1.target, day1.data["votes"]) == ("Dev Eng", {"Dev Eng": 4, "Cleo Diaz": 3})


def test_a_player_let_in_during_the_game_plays(tmp_path: Path) -> None:
    g = _mutated(tmp_path, {"node.csv": ("11,2019-05-10 18:15:10.000000", "11,2019-05-10 18:04:00.000000")})
    assert g.rules["n_players"] == 10 and "Ivan Joy" in [p.name for p in g.players]
    assert "Ivan Joy joined after the game had ended: not a player" not in g.validity.get("notes", [])


def test_a_night_without_a_mafia_vote_is_invalid_and_undecided(tmp_path: Path) -> None:
    """75263921-shaped: no mafia vote in night 1 (here: H without Ada Bell, 8 players). The rules call it invalid;
    the export cannot tell a choice not to kill from players not playing, so the import report says so."""
    folder = tmp_path / "data" / H
    shutil.copytree(FIXTURES / H, folder)
    info = (folder / "info.csv").read_text().replace("Phase Change to Daytime: Victim - Ada Bell",
                                                     "Phase Change to Daytime")
    (folder / "info.csv").write_text("".join(ln for ln in info.splitlines(keepends=True) if "Ada" not in ln))
    node = (folder / "node.csv").read_text()
    (folder / "node.csv").write_text("".join(ln for ln in node.splitlines(keepends=True) if "Ada Bell" not in ln))
    con = connect(tmp_path / "w.duckdb")
    report = run_import("dallinger", tmp_path / "data", con)
    con.close()
    assert report.invalid == {"no votes cast": 1}
    assert report.undecided == [(H, "no mafia vote in night 1: a choice not to kill or players not playing; the "
                                    "export cannot tell (pin the game list to decide)")]
    assert f"undecided by the rules (landed as the rules say; a study may pin its game list): 1\n    {H}: no mafia " \
           "vote in night 1" in report.to_text()


@pytest.mark.parametrize(("name", "n_players"), [(A, 5), (G, 4)])
def test_games_outside_the_protocol_are_invalid_with_that_reason(items: dict[str, GameRecord | UnreadableGame],
                                                                 name: str, n_players: int) -> None:
    g = game(items, name)
    assert g.validity["reason"] == "outside the study's protocol"
    assert g.validity["details"] == [f"{n_players} players and 1 mafioso (the study's games have 7-12 players and 2 "
                                     "mafiosos)"]


def test_dropout_is_a_technical_failure(items: dict[str, GameRecord | UnreadableGame]) -> None:
    g = game(items, B)
    drop = [e for e in g.events if e.type == "info" and e.data.get("kind") == "dropout"]
    assert [(e.phase, e.round, e.actor) for e in drop] == [("day", 1, "Ivy Jo")]
    assert g.validity == {"valid": False, "reason": "technical failure",
                          "details": ["Ivy Jo dropped out of the game in day 1", "5 players and 1 mafioso (the study's "
                                      "games have 7-12 players and 2 mafiosos)", "also: outside the study's protocol"]}
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
    assert g.validity == {"valid": False, "reason": "no votes cast", "details": [
        "no votes cast in night 1", "4 players and 1 mafioso (the study's games have 7-12 players and 2 mafiosos)",
        "also: outside the study's protocol"]}
    assert "undecided" not in g.validity  # the protocol decides it
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
    assert (first.games_read, first.landed, first.valid, len(first.unreadable)) == (8, 6, 1, 2)
    assert first.invalid == {"technical failure": 1, "no winner recorded": 1, "no votes cast": 1,
                             "outside the study's protocol": 2}
    assert first.flags == {"dropout_before_elimination": 1, "message_after_elimination": 2,
                           "repeated_phase_change": 7, "vote_after_elimination": 2}
    assert len(first.notes) == 3 and not first.undecided
    events = con.execute("select count(*) from raw_events").fetchone()
    second = run_import("dallinger", FIXTURES, con)
    assert (second.landed, second.skipped) == (0, 6)
    assert con.execute("select count(*) from raw_events").fetchone() == events
    assert con.execute("select count(*), count(distinct game_id) from raw_games").fetchone() == (6, 6)
    con.close()

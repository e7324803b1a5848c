"""What the Mafia Detector reads ("Hidden in Plain Text" §III.D): the daytime as the players saw it — every night
death announced the morning after, with no role; votes; who was voted out, role redacted; nothing of the night chat.

The human game is fixture H (`tests/fixtures/datasets/dallinger/4c5d6e7f-…-data`, README.md), written in the shape of
the real export's `node.csv` / `info.csv` / `network.csv` (omonida/mafia-dataset, e.g. `66d4e46b-…-data`,
`261846b6-…-data`, `dbecdd48-…-data`); the simulated games are played by the async engine with scripted agents.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from mafiabench.detect.cleansed_transcript import Transcript, morning_of, starts_at_night
from mafiabench.detect.detection_runs import DetectorSpec, GameInput, load_games
from mafiabench.detect.detectors import load_detector_prompt
from mafiabench.importers import run_import
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.warehouse.raw import connect, load_records

H = Path(__file__).parents[1] / "fixtures" / "datasets" / "dallinger" / "4c5d6e7f-8091-a2b3-c4d5-e6f708192a3b-data"
MANAGER = "Game-Manager"
WORDS = load_detector_prompt().words  # the shipped version's lines (v1)
ROLE_WORDS = re.compile(r"\b(mafia|mafias|mafioso|mafiosos|mafiosi|bystanders?|villagers?|town|detective|role)\b",
                        re.IGNORECASE)


def read(game: GameInput, cut: int) -> Transcript:
    return game.transcript(cut, WORDS)


def check_every_night_kill_is_announced_and_no_role_leaks(game: GameInput) -> list[int]:
    """The invariant, on every cut of one game: each night death whose morning is at or before the cut is announced
    under that morning's header, none after the cut; no narrator line names a role; no night message or night
    vote is in it. Returns the cuts checked."""
    night_first = starts_at_night(game.events)
    deaths = [e for e in game.events if e.type == "death" and e.phase == "night"]
    night_lines = [f"[{e.data.get('clock')}] {e.actor}: {' '.join((e.text or '').split())}" for e in game.events
                   if e.type == "mafia_message"]
    cuts = game.cuts(None)
    for cut in cuts:
        t = read(game, cut)
        sections: dict[int, list[str]] = {}
        day = 0
        for line in t.lines:
            if m := re.fullmatch(r"--- Day (\d+) ---", line):
                day = int(m[1])
                continue
            sections.setdefault(day, []).append(line)
        assert max(sections) == cut, "a cut ends with its own day"
        for e in deaths:
            morning = morning_of(e, night_first)
            said = [ln for d, lines in sections.items() for ln in lines if f"{e.target} was found dead" in ln]
            if morning <= cut:
                assert len(said) == 1 and said[0] in sections[morning], (cut, e.target, t.lines)
                assert said[0] == sections[morning][0] or sections[morning][0].endswith("this morning."), \
                    "the morning's deaths open the day"
            else:
                assert not said, f"{e.target}'s death leaked into cut {cut}"
        for ln in t.lines:
            if f"{MANAGER}:" in ln or ln.startswith("---"):
                assert not ROLE_WORDS.search(ln), f"role word in a narrator line: {ln}"
        assert not set(night_lines) & set(t.lines), "night chat leaked"
        for e in game.events:
            if e.type == "vote" and e.phase == "night":
                assert f"[{e.data.get('clock')}] {MANAGER}: {e.actor} voted for {e.target}" not in t.lines, e
    return cuts


@pytest.fixture(scope="module")
def human(tmp_path_factory: pytest.TempPathFactory) -> GameInput:
    con = connect(tmp_path_factory.mktemp("h") / "w.duckdb")
    report = run_import("dallinger", H, con)
    assert report.valid == 1
    (game,) = load_games(con, DetectorSpec(sources=("ibraheem2022-human",)))
    con.close()
    return game


def test_every_night_kill_of_the_human_game_is_announced_by_its_morning(human: GameInput) -> None:
    assert check_every_night_kill_is_announced_and_no_role_leaks(human) == [1, 2, 3]
    t1 = read(human, 1)
    assert t1.lines[:2] == ("--- Day 1 ---", "[00:01:05] Game-Manager: Ada Bell was found dead this morning.")
    assert "[00:03:46] Game-Manager: Dev Eng was voted out." in t1.lines
    assert "[00:01:50] Game-Manager: Ben Cole voted for Dev Eng" in t1.lines  # a vote for the absent player
    # The game ends on the night-3 kill: its last cut is that morning's announcement alone.
    t3 = read(human, 3)
    assert t3.lines[-2:] == ("--- Day 3 ---", "[00:08:44] Game-Manager: Ben Cole was found dead this morning.")
    assert [ln for ln in t3.lines if "found dead" in ln] == [
        "[00:01:05] Game-Manager: Ada Bell was found dead this morning.",
        "[00:04:55] Game-Manager: Fay Gold was found dead this morning.",
        "[00:08:44] Game-Manager: Ben Cole was found dead this morning."]


def test_speech_is_kept_as_said_and_the_night_is_not(human: GameInput) -> None:
    text = read(human, 3).text
    assert "Cleo Diaz: im a bystander, honest" in text  # a player's words are data, role word and all
    for night in ("ada first", "fay is onto us", "ben now and we win", "ok ada"):
        assert night not in text
    assert "Phase Change" not in text and "dropped out" not in text and "they were" not in text


@pytest.mark.parametrize(("n_players", "seed"), [(7, 0), (7, 4), (7, 5), (8, 0), (8, 1)])
def test_every_night_kill_of_a_simulated_game_is_announced_the_next_morning(tmp_path: Path, n_players: int,
                                                                            seed: int) -> None:
    """Day-first games (ours): night d's victim is announced on the morning of day d + 1; a game that ends on a
    night kill (the 8-player seeds do) has a last cut with only that announcement."""
    spec = GameSpec.build(f"sim-{seed}", "async", {"day_seconds": 30, "night_seconds": 15, "n_players": n_players},
                          seed, {"default": "scripted/naive"})
    record = asyncio.run(play_game(spec, BackendPool()))
    con = connect(tmp_path / "w.duckdb")
    load_records(con, [record])
    (game,) = load_games(con, DetectorSpec())
    con.close()
    assert not starts_at_night(game.events)
    cuts = check_every_night_kill_is_announced_and_no_role_leaks(game)
    deaths = [e.round for e in game.events if e.type == "death"]
    assert deaths, "the seed's game has a night kill"
    assert cuts[-1] == max([e.round for e in game.events if e.phase == "day"] + [d + 1 for d in deaths])
    last = record.events[-2]
    assert (last.type == "death") == (n_players == 8)
    if last.type == "death":  # ended on a night kill: the last cut is its morning alone
        t = read(game, cuts[-1])
        assert t.lines[-2:] == (f"--- Day {cuts[-1]} ---",
                                f"[{last.data['clock']}] Game-Manager: {last.target} was found dead this morning.")

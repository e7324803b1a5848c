"""The Mini-Mafia web game's databases (a person in one seat, models in the others): every quirk with expectations
computed by hand from tests/fixtures/datasets/mini_mafia_web/*.sql, the models each session's label called, the
games both databases hold landing once, and the person's name never read."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import duckdb
import pytest

from mafiabench.cli import main
from mafiabench.errors import UserError
from mafiabench.importers.common import UnreadableGame, make_game_id
from mafiabench.importers.mini_mafia_sqlite import read_mini_mafia_sqlite
from mafiabench.importers.mini_mafia_web import read_mini_mafia_web
from mafiabench.record import GameRecord
from support.records import landed, rows

FIXTURES = Path(__file__).parents[1] / "fixtures" / "datasets" / "mini_mafia_web"
GPT4O, GPT5 = "openai/gpt-4o-mini", "openai/gpt-5-mini"


def database(folder: Path, name: str) -> Path:
    path = folder / f"{name}.db"
    con = sqlite3.connect(path)
    con.executescript((FIXTURES / f"{name}.sql").read_text(encoding="utf-8"))
    con.close()
    return path


@pytest.fixture
def human_db(tmp_path: Path) -> Path:
    return database(tmp_path, "mini_mafia_human")


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    return database(tmp_path, "mini_mafia_human_old")


def games(path: Path, study: str | None = None) -> dict[int, GameRecord]:
    out = {}
    for g in read_mini_mafia_web(path, study=study):
        assert isinstance(g, GameRecord), g
        out[int(str(g.provenance.source_file).rsplit("#", 1)[1])] = g
    return out


def seats(g: GameRecord) -> list[tuple[str, str, str, str, str | None]]:
    return [(p.name, p.role, p.agent, p.model, p.model_raw) for p in g.players]


def test_a_person_as_mafioso_against_the_label_gpt_4_1_mini_which_called_gpt_4o_mini(human_db: Path) -> None:
    g = games(human_db)[2]
    assert g.validity == {"valid": True, "reason": None}
    assert g.game_id == make_game_id("mini-mafia-web", "2025-11-20T13:08:08.200000")
    # Listed by name, never by role; the label kept as the raw name of the model it called.
    assert seats(g) == [("Alice", "villager", GPT4O, GPT4O, "gpt-4.1_mini"),
                        ("Bob", "detective", GPT4O, GPT4O, "gpt-4.1_mini"),
                        ("Charlie", "mafioso", "human/web", "human", None),
                        ("Diana", "villager", GPT4O, GPT4O, "gpt-4.1_mini")]
    assert g.design is not None
    assert {k: g.design[k] for k in ("cell", "capabilities", "target", "background", "background_label",
                                     "background_models", "human_role", "human_role_recorded")} == {
        "cell": f"deceive|human|{GPT4O}", "capabilities": ["deceive"], "target": "human", "background": GPT4O,
        "background_label": "gpt-4.1_mini", "background_models": {"detective": GPT4O, "villager": GPT4O},
        "human_role": "mafioso", "human_role_recorded": True}
    assert "gpt-4.1_mini calls gpt-4o-mini" in g.design["background_read"]
    # An inference from the web game's files, said so: the database records the label only.
    assert g.design["background_inferred"] is True
    assert g.design["background_read"].startswith("inferred, not recorded: ")
    assert g.outcome == {"status": "finished", "winner": "town", "reason": "mafioso arrested", "tie_decided": False,
                         "days": 1}
    kinds = [(e.type, e.actor, e.target) for e in g.events if e.type in ("kill", "death", "investigate", "vote",
                                                                          "elimination")]
    assert kinds == [("kill", "Charlie", "Diana"), ("death", None, "Diana"), ("investigate", "Bob", "Charlie"),
                     ("vote", "Alice", "Charlie"), ("vote", "Bob", "Charlie"), ("vote", "Charlie", "Bob"),
                     ("elimination", None, "Charlie")]
    talk = [(e.type, e.actor, e.format_failure, e.data["discussion_round"]) for e in g.events
            if e.type in ("message", "silence")]
    # The person's unquoted message the study's parser read as silence: a silence, its text kept beside it.
    assert talk == [("message", "Alice", False, 1), ("message", "Bob", False, 1), ("silence", "Charlie", True, 1),
                    ("message", "Charlie", False, 2), ("message", "Alice", False, 2), ("message", "Bob", False, 2)]
    silence = next(e for e in g.events if e.type == "silence")
    assert silence.data["raw_response"] == "Bob is lying, he is the mafioso."
    assert g.rules["discussion_rounds"] == 2 and g.rules["night"] == "scripted"


def test_the_villager_session_labelled_gpt_5_mini_called_gpt_4o_mini(human_db: Path) -> None:
    """The configuration committed with that day's games calls gpt-4o-mini under the label gpt-5-mini; the same
    label on another day is read as the setup reads it."""
    g = games(human_db)[4]
    assert g.validity["valid"] is True and g.outcome["winner"] == "town"
    assert seats(g) == [("Alice", "villager", "human/web", "human", None),
                        ("Bob", "mafioso", GPT4O, GPT4O, "gpt-5-mini"),
                        ("Charlie", "villager", GPT4O, GPT4O, "gpt-5-mini"),  # killed: the detective's model
                        ("Diana", "detective", GPT4O, GPT4O, "gpt-5-mini")]
    assert g.design is not None and g.design["cell"] == f"detect|human|{GPT4O}"
    assert "719b4100" in g.design["background_read"]
    other_day = games(human_db)[7]  # gpt-5-mini+grok-3-mini: mafioso + detective, all three different
    assert other_day.design is not None
    assert other_day.design["background_models"] == {"mafioso": GPT5, "detective": "xai/grok-3-mini"}
    assert other_day.design["cell"].startswith("mixed|") and other_day.design["capabilities"] == []


def test_two_names_a_random_vote_and_a_tie_broken_at_random(human_db: Path) -> None:
    g = games(human_db)[5]
    assert g.validity["valid"] is True
    assert g.design is not None and g.design["cell"] == f"disclose|human|{GPT5}"
    assert g.outcome["winner"] == "mafia" and g.outcome["tie_decided"] is True
    votes = [(e.actor, e.target, e.format_failure, e.random_fallback) for e in g.events if e.type == "vote"]
    assert votes == [("Charlie", "Alice", False, False), ("Alice", "Bob", False, False),
                     ("Bob", "Charlie", True, True)]
    elimination = next(e for e in g.events if e.type == "elimination")
    assert elimination.target == "Charlie" and elimination.tie_break
    assert elimination.data["votes"] == {"Alice": 1, "Bob": 1, "Charlie": 1}


def test_games_whose_tables_disagree_land_invalid_with_the_reason(human_db: Path) -> None:
    g = games(human_db)
    assert g[1].validity["valid"] is False and g[1].validity["reason"] == "inconsistent tables"
    assert g[1].validity["details"] == [
        "no kill step: the night is not recorded",
        "votes by Bob, Diana: expected one by each of Alice, Bob, Diana",
        "messages per player {'Alice': 4, 'Bob': 2, 'Diana': 2}: expected as many each"]
    assert g[6].validity["details"] == ["games.winner is EVIL, but Alice (the mafioso) was arrested"]
    assert [n for n, r in g.items() if r.validity["valid"]] == [2, 3, 4, 5, 7]


def test_the_old_database_seats_the_person_as_mafioso_and_never_reads_their_name(old_db: Path) -> None:
    g = games(old_db)
    assert g[1].design is not None and g[1].design["human_role"] == "mafioso"
    assert g[1].design["human_role_recorded"] is False
    assert g[1].design["background_models"] == {"detective": GPT4O, "villager": GPT4O}
    assert "joined by '_'" in g[1].design["background_read"]
    assert g[2].validity["valid"] is True and g[2].outcome["winner"] == "town"
    assert [(e.actor, e.target, e.random_fallback) for e in g[2].events if e.type == "vote"][-1] == (
        "Bob", "Charlie", True)
    for record in g.values():
        assert "Placeholder Person" not in json.dumps(record.to_dict())


def test_a_game_in_both_databases_lands_once(human_db: Path, old_db: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    wh = tmp_path / "w.duckdb"
    assert main(["import", "mini-mafia-web", str(human_db), "--warehouse", str(wh), "--study", "humans"]) == 0
    assert ": 7 landed, 0 already present, 5 valid, 2 invalid" in capsys.readouterr().out
    assert main(["import", "mini-mafia-web", str(old_db), "--warehouse", str(wh), "--study", "humans"]) == 0
    assert ": 1 landed, 1 already present, 1 valid, 1 invalid" in capsys.readouterr().out
    with duckdb.connect(str(wh), read_only=True) as con:
        assert con.execute("select count(*) from raw_games").fetchone() == (8,)


def test_the_person_is_a_model_of_the_capability_marts(human_db: Path, old_db: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Valid games only, the cell's background the model called; four cells cannot fit the latent model (the builds'
    sampler says why rather than sampling)."""
    monkeypatch.setenv("MAFIABENCH_LATENT_METHOD", "nuts")
    records = [g for db in (human_db, old_db) for g in games(db, "humans").values()]
    con = landed({g.game_id: g for g in records}.values(), only=["mart_capability_win_rates", "mart_latent_fit"])
    win_rates = rows(con, "select * from mart_capability_win_rates where study = 'humans'")
    assert {(r["capability"], r["target_model"], r["background"], r["n"], r["k"]) for r in win_rates} == {
        ("deceive", "human", GPT4O, 3, 1),  # games 2, 3 and the old game 2: the person's mafia won game 3
        ("detect", "human", GPT4O, 1, 1),
        ("disclose", "human", GPT5, 1, 0)}
    # The backgrounds are the importer's reading of a session label: the marts say so, as the records do.
    assert {r["background_inferred"] for r in win_rates} == {True}
    assert rows(con, "select distinct background_inferred from raw_games") == [{"background_inferred": True}]
    # The person's seat is recorded; every model's seat (the other villager's too, when the person is one) is not.
    assert rows(con, "select distinct model = 'human' as person, model_inferred from raw_players order by all") == [
        {"person": False, "model_inferred": True}, {"person": True, "model_inferred": False}]
    assert [(r["status"], r["reason"][:19]) for r in rows(con, "select * from mart_latent_fit")] == [
        ("not_fitted", "4 cells of games fo")]


@pytest.mark.parametrize(("sql", "words"), [
    ("create table games (game_id integer)", "games.timestamp, winner"),
    ("create table other (x integer)", "table games missing"),
])
def test_not_a_web_game_database_is_named(tmp_path: Path, sql: str, words: str) -> None:
    path = tmp_path / "x.db"
    con = sqlite3.connect(path)
    con.executescript(sql)
    con.close()
    with pytest.raises(UserError, match=words):
        list(read_mini_mafia_web(path))


def test_each_importer_names_the_other_for_the_other_database(human_db: Path, tmp_path: Path) -> None:
    batch = tmp_path / "batch.db"
    con = sqlite3.connect(batch)
    con.executescript((FIXTURES.parent / "mini_mafia_sqlite" / "mini_mafia.sql").read_text(encoding="utf-8"))
    con.close()
    with pytest.raises(UserError, match="import mini-mafia-sqlite"):
        list(read_mini_mafia_web(batch))
    with pytest.raises(UserError, match="import mini-mafia-web"):
        list(read_mini_mafia_sqlite(human_db))


def test_an_unknown_label_is_unreadable_with_the_field_and_value(human_db: Path) -> None:
    con = sqlite3.connect(human_db)
    con.execute("update games set background_name = 'claude-x' where game_id = 3")
    con.commit()
    con.close()
    out = {str(g.source_file): g for g in read_mini_mafia_web(human_db) if isinstance(g, UnreadableGame)}
    assert list(out) == ["mini_mafia_human.db#3"]
    assert "games.background_name 'claude-x'" in out["mini_mafia_human.db#3"].reason

"""The Mafia Detector step: cleansed transcripts leak nothing, detectors name exactly k players, answers land once."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from mafiabench.backends.endpoints import EndpointConfig
from mafiabench.detect.cleansed_transcript import cleanse
from mafiabench.detect.detection_runs import DetectorSpec, GameInput, load_games, run_detection
from mafiabench.detect.detectors import LLMDetector, PolicyDetector, load_detector_prompt, parse_names
from mafiabench.importers.common import run_import
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.record import GameRecord
from mafiabench.testing import FakeModelServer
from mafiabench.warehouse.raw import connect, load_records

WORDS = load_detector_prompt().words
FIXTURES = Path(__file__).parents[1] / "fixtures" / "datasets"
ROLE_WORDS = re.compile(r"\b(mafia|mafioso|mafiosos|bystander|bystanders|villager|detective|role)\b", re.I)


def simulated(seed: int, experiment: str | None = None, **rules: object) -> GameRecord:
    options = {"day_seconds": 40, "night_seconds": 20, **rules}
    design = {"experiment": experiment, "cell": "c", "game_index": seed} if experiment else None
    spec = GameSpec.build(f"sim-{seed}", "async", options, seed, {"default": "scripted/naive"}, design=design)
    return asyncio.run(play_game(spec, BackendPool()))


def warehouse(tmp_path: Path, records: list[GameRecord], *, human: bool = True) -> Path:
    path = tmp_path / "w.duckdb"
    con = connect(path)
    load_records(con, records)
    if human:
        run_import("dallinger", FIXTURES / "dallinger", con)
        run_import("llmafia", FIXTURES / "llmafia", con)
    con.close()
    return path


def assert_clean(game: GameInput) -> int:
    """The leak checks, on every cut of one game; returns the number of cuts checked."""
    mafia = set(game.mafia)
    cuts = game.cuts(None)
    assert cuts, f"{game.game_id} has no day to cut"
    for cut in cuts:
        t = game.transcript(cut, WORDS)
        kept_lines = set(t.lines)
        for e in game.events:
            stamp = f"[{e.data['clock']}] " if e.data.get("clock") else ""
            line = f"{stamp}{e.actor}: {' '.join((e.text or '').split())}"
            private = e.visibility != "public" or e.phase != "day"
            if e.type in ("message", "mafia_message") and private:
                assert line not in kept_lines, f"night/private chat leaked: {line}"
            if e.type in ("role_assigned", "investigate", "belief", "schedule", "kill", "death", "info"):
                assert not (e.text and e.text in t.text), f"{e.type} leaked: {e.text}"
            if e.type == "vote" and private:
                assert f"{e.actor} voted for {e.target}" not in "\n".join(
                    ln for ln in t.lines if ln.startswith(stamp)
                ), f"night vote leaked: {e}"
            if e.type == "message" and not private and e.round <= cut:
                assert line in kept_lines, "a public day message went missing"
        for ln in t.lines:
            if "Game-Manager:" in ln:  # the narrator's lines carry no role, no night event
                assert not ROLE_WORDS.search(ln), ln
                assert "killed" not in ln and "night" not in ln.lower(), ln
        assert "they were" not in t.text and "they were a" not in t.text
        # Nothing of later days, and the mafia's names are not announced as such.
        assert f"--- Day {cut + 1} ---" not in t.text
        assert not any(f"{m} was a mafioso" in t.text for m in mafia)
    return len(cuts)


def test_cleansed_transcript_of_a_simulated_game_leaks_no_role_night_chat_or_private_event(tmp_path: Path) -> None:
    rec = simulated(21, n_players=8)
    assert any(e.type == "mafia_message" for e in rec.events), "the seed must give a night chat to drop"
    assert any(e.type == "death" for e in rec.events) and any(e.type == "elimination" for e in rec.events)
    con = connect(warehouse(tmp_path, [rec], human=False))
    (game,) = load_games(con, DetectorSpec())
    con.close()
    assert assert_clean(game) >= 2
    t = game.transcript(1, WORDS)
    assert any(ln.endswith("was voted out.") for ln in t.lines)
    assert any(" voted for " in ln for ln in t.lines)


def test_cleansed_transcript_of_an_imported_human_game_leaks_nothing(tmp_path: Path) -> None:
    con = connect(warehouse(tmp_path, []))
    games = load_games(con, DetectorSpec(valid_only=False, sources=("ibraheem2022-human",)))
    con.close()
    assert games, "the Dallinger fixture has finished human games"
    nights = [e for g in games for e in g.events if e.type == "mafia_message"]
    assert nights, "the fixture's human games have a mafia night chat to drop"
    assert sum(assert_clean(g) for g in games) >= 2


def test_parse_names_is_tolerant_and_exact() -> None:
    players = ["Ann", "Anna", "Bo", "Cy Young"]
    assert parse_names("Anna\nBo", players, 2) == (["Anna", "Bo"], None)
    assert parse_names("1. **anna**\n2. cy young (mafia)", players, 2) == (["Anna", "Cy Young"], None)
    assert parse_names("I think Bo and Bo again, then Ann", players, 2) == (["Bo", "Ann"], None)
    names, error = parse_names("Probably Bo.", players, 2)
    assert names == ["Bo"] and error
    assert parse_names("", players, 2)[1] == "empty answer"


def test_most_voted_detector_names_the_top_k_with_seeded_ties(tmp_path: Path) -> None:
    from mafiabench.engine.events import Event

    players = ("A", "B", "C", "D", "E")
    votes = [("A", "C"), ("B", "C"), ("C", "D"), ("D", "B"), ("E", "E")]  # C:2; B, D, E: 1 each (a tie for #2)
    events = [Event(i, "day", 1, "vote", v, t) for i, (v, t) in enumerate(votes)]
    picks: Counter[str] = Counter()
    for g in range(300):
        t = cleanse(f"g{g}", events, players, 2, 1, WORDS)
        d = asyncio.run(PolicyDetector("policy/most-voted").detect(t))
        assert len(d.predicted) == 2 and d.predicted[0] == "C" and not d.format_failure
        picks[d.predicted[1]] += 1
        again = asyncio.run(PolicyDetector("policy/most-voted").detect(t))
        assert again.predicted == d.predicted  # seeded
    assert set(picks) == {"B", "D", "E"} and min(picks.values()) > 60  # the tie is broken uniformly


def test_random_detector_names_k_distinct_players() -> None:
    t = cleanse("g", [], ("A", "B", "C", "D"), 2, 1, WORDS)
    for _ in range(3):
        d = asyncio.run(PolicyDetector("policy/random").detect(t))
        assert len(set(d.predicted)) == 2 and set(d.predicted) <= {"A", "B", "C", "D"}


def test_offline_detection_lands_once_per_key_on_simulated_and_imported_games(tmp_path: Path) -> None:
    wh = warehouse(tmp_path, [simulated(1), simulated(2)])
    spec = DetectorSpec(models=("policy/most-voted", "policy/random", "fake/detector"))
    first = run_detection(wh, spec)
    assert first.landed == first.planned > 0 and not first.failed
    second = run_detection(wh, spec)
    assert second.landed == 0 and second.already_landed == first.planned
    con = duckdb.connect(str(wh), read_only=True)
    dup = con.execute(
        "select count(*) from (select game_id, cut, detector, prompt_sha256, count(*) n from raw_detections "
        "group by all having n > 1)"
    ).fetchone()
    assert dup == (0,)
    sources = {r[0] for r in con.execute(
        "select distinct g.source from raw_detections d join raw_games g using (game_id)").fetchall()}
    assert {"simulation", "ibraheem2022-human", "llmafia"} <= sources
    bad = con.execute("select count(*) from raw_detections where len(predicted) <> k "
                      "or len(list_distinct(predicted)) <> k").fetchone()
    assert bad == (0,)
    (sha,) = con.execute("select distinct prompt_sha256 from raw_detections where detector = 'fake/detector'"
                         ).fetchone()  # type: ignore[misc]
    assert sha == load_detector_prompt("v1").sha256
    (temp,) = con.execute("select distinct temperature from raw_detections where detector = 'fake/detector'"
                          ).fetchone()  # type: ignore[misc]
    assert temp == 0.0
    con.close()


def test_detector_calls_through_the_openai_sdk_with_http_faults_land_exactly_once(tmp_path: Path) -> None:
    wh = warehouse(tmp_path, [simulated(3), simulated(4)], human=True)
    with FakeModelServer(latency_s=0.0, hang_s=0.5, seed=5) as srv:
        endpoints = {"local": EndpointConfig("local", "openai", base_url=srv.base_url_openai, key_required=False)}
        spec = DetectorSpec(models=("local/detector-m",), max_attempts=3, backoff_base_s=0.001, concurrency=1)
        # The first detection fails for good (three 500s); the next ones see a 429, a timeout, a garbage answer.
        srv.push_faults(["500", "500", "500", "429", "timeout", "malformed"])
        first = run_detection(wh, spec, endpoints=endpoints)
        second = run_detection(wh, spec, endpoints=endpoints)
        third = run_detection(wh, spec, endpoints=endpoints)
        statuses = Counter(r["status"] for r in srv.requests)
        bodies = [r["body"] for r in srv.requests if r["status"] == 200]
    assert statuses[429] == 1 and statuses[500] == 3 and statuses[200] >= first.planned
    assert first.calls == first.planned and len(first.failed) == 1 and first.landed == first.planned - 1
    assert "server_error" in first.failed[0] or "500" in first.failed[0]
    assert second.landed == 1 and second.already_landed == first.landed and second.calls == 1
    assert third.landed == 0 and third.calls == 0
    assert all(b["temperature"] == 0.0 for b in bodies)
    con = duckdb.connect(str(wh), read_only=True)
    n, keys = con.execute(
        "select count(*), count(distinct (game_id, cut, detector, prompt_sha256)) from raw_detections"
    ).fetchone()  # type: ignore[misc]
    assert n == keys == first.planned
    (retried,) = con.execute("select count(*) from raw_detections where attempts > 1").fetchone()  # type: ignore[misc]
    (flagged,) = con.execute(
        "select count(*) from raw_detections where format_failure and random_fallback").fetchone()  # type: ignore[misc]
    assert retried >= 1 and flagged == 1
    con.close()


def test_unknown_detector_or_prompt_is_a_clear_error(tmp_path: Path) -> None:
    from mafiabench.errors import UserError

    with pytest.raises(UserError, match="policy/most-voted"):
        run_detection(tmp_path / "w.duckdb", DetectorSpec(models=("policy/oracle",)))
    with pytest.raises(UserError, match="v9"):
        load_detector_prompt("v9")
    with pytest.raises(UserError, match="unknown provider"):
        run_detection(tmp_path / "w.duckdb", DetectorSpec(models=("nowhere/m",)))


def test_llm_detector_fills_and_flags_a_short_answer() -> None:
    from mafiabench.backends.scripted_backend import ScriptedBackend

    t = cleanse("g", [], ("Ann", "Bo", "Cy", "Di"), 2, 1, WORDS)
    d = LLMDetector("scripted/x", ScriptedBackend(["I am sure it is Cy."]))
    det = asyncio.run(d.detect(t))
    assert det.predicted[0] == "Cy" and len(set(det.predicted)) == 2
    assert det.format_failure and det.random_fallback and det.parse_error


def test_the_api_key_reaches_neither_raw_detections_nor_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A hostile endpoint echoes the key back in its error messages and in every answer; the command's detections,
    its transcripts, its output and every log line (the SDK's debug logs included) hold no trace of it."""
    import logging
    import secrets

    from mafiabench.cli import main

    key = "sk-detect-" + secrets.token_hex(16)
    monkeypatch.setenv("DETECT_HOSTILE_KEY", key)
    monkeypatch.chdir(tmp_path)
    wh = warehouse(tmp_path, [simulated(5, experiment="k")], human=False)
    caplog.set_level(logging.DEBUG)
    with FakeModelServer(latency_s=0.0, hang_s=0.3, seed=7) as srv:
        srv.echo_credentials = True
        srv.push_faults(["429", "500", "timeout", "malformed"])
        exp = tmp_path / "exp.toml"
        exp.write_text(
            f'name = "k"\nvariant = "async"\nwarehouse = "{wh}"\n'
            '[[cells]]\nname = "c"\nagents = {default = "scripted/naive"}\n'
            f'[endpoints.hostile]\nkind = "openai"\nbase_url = "{srv.base_url_openai}"\n'
            'api_key_env = "DETECT_HOSTILE_KEY"\n'
            '[detector]\nmodels = ["hostile/detector-m"]\nmax_attempts = 4\nbackoff_base_s = 0.001\nconcurrency = 1\n'
        )
        assert main(["detect", str(exp), "--no-prefect"]) == 0
        sent = json.dumps(srv.requests)
    out = capsys.readouterr()
    assert key in sent, "the server must have echoed the key for this test to mean anything"
    assert any(r["status"] == 429 for r in srv.requests) and any(r["status"] == "hung" for r in srv.requests)
    con = duckdb.connect(str(wh), read_only=True)
    stored = json.dumps(con.execute("select * from raw_detections").fetchall(), default=str)
    stored += json.dumps(con.execute("select * from raw_detection_transcripts").fetchall(), default=str)
    (n,) = con.execute("select count(*) from raw_detections").fetchone()  # type: ignore[misc]
    (masked,) = con.execute(
        "select count(*) from raw_detections where response_text like '%[redacted]%'").fetchone()  # type: ignore[misc]
    con.close()
    assert n >= 2 and masked >= 1
    assert key not in stored
    assert key not in out.out and key not in out.err
    assert caplog.records and key not in caplog.text


@pytest.mark.parametrize(("answer", "names", "reason"), [
    ("Mafia: Bo, Cy Young\nReason: Ann accused Bo early; Anna stayed quiet.", ["Bo", "Cy Young"],
     "Ann accused Bo early; Anna stayed quiet."),
    ("**Mafia:** anna, bo\n\n**Reason:** Cy Young voted with Ann.", ["Anna", "Bo"], "Cy Young voted with Ann."),
    ("Reason: Ann and Cy Young both deflected.\nMafia: Ann, Cy Young", ["Ann", "Cy Young"],
     "Ann and Cy Young both deflected."),
    ("Bo\nAnna\n\nReasoning: Cy Young was loud.", ["Bo", "Anna"], "Cy Young was loud."),
    ("Anna\nBo", ["Anna", "Bo"], None),  # v1's answer: names only
])
def test_a_reasoned_answer_is_read_for_the_names_before_the_reason(answer: str, names: list[str],
                                                                   reason: str | None) -> None:
    """The paper's detector names the mafia and gives a reason (Fig. 2): names come from the answer line only,
    never from players the reason mentions; the reason is kept."""
    from mafiabench.detect.detectors import split_reason

    players = ["Ann", "Anna", "Bo", "Cy Young"]
    part, why = split_reason(answer)
    assert parse_names(part, players, 2) == (names, None)
    assert why == reason


def test_detector_prompt_v2_asks_for_a_reason_and_reads_the_shipped_lines() -> None:
    v1, v2 = load_detector_prompt("v1"), load_detector_prompt("v2")
    assert "Reason:" in v2.template and "Reason:" not in v1.template
    assert v2.words == v1.words and v2.sha256 != v1.sha256
    assert "found dead this morning" in v2.words["death"]

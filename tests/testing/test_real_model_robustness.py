"""The real llama-server's limits, met as a study meets them (issue 28, item 4): a prompt longer than the context
window, `max_tokens` reached mid-word, an empty answer, the server killed mid-study (the study resumes and completes
once it is back), and 64 games in flight against a server with two slots (the server queues, no game is lost).
Each test fails if the behaviour it names is removed."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from mafiabench.testing.llama_server import LlamaServer
from support.real_model import SPEC, cli, mini_mafia_game, mini_mafia_study, require_installed, start_server

pytestmark = pytest.mark.real_model

GEMMA_EOS = 1  # `<eos>` in Gemma's vocabulary (llama-server's /tokenize of "<eos>" with special tokens)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LlamaServer]:
    srv = start_server(tmp_path, slots=2, ctx_per_slot=4096)
    try:
        yield srv
    finally:
        srv.stop()


def play(tmp_path: Path, base_url: str, settings: dict[str, float] | None = None) -> tuple[int, dict]:  # type: ignore[type-arg]
    (tmp_path / "game.toml").write_text(mini_mafia_game(base_url, settings=settings))
    run = cli("play", "--config", "game.toml", "--out", "game.json", "--quiet", cwd=tmp_path)
    return run.returncode, json.loads((tmp_path / "game.json").read_text())


def test_prompt_longer_than_the_context_fails_the_game_once_and_says_why(tmp_path: Path) -> None:
    """The server refuses (HTTP 400, its message naming the context size): a permanent error, not retried, and
    the game is kept as failed with that message (a retry loop would show attempts > 1, a swallowed error an
    empty answer)."""
    with start_server(tmp_path, slots=1, ctx_per_slot=256) as small:
        code, record = play(tmp_path, small.base_url)
    assert code == 1
    assert record["outcome"]["status"] == "failed"
    (call,) = record["calls"]
    assert call["error_class"] == "bad_request" and call["attempts"] == 1
    assert "exceeds the available context size (256 tokens)" in record["error"], record["error"]


def test_max_tokens_reached_mid_word_is_recorded_and_read_as_cut(tmp_path: Path, server: LlamaServer) -> None:
    """Three tokens for a message: the server stops with finish_reason `length` after exactly three; the record
    keeps that reason and count, and the message is either kept as cut (an opened quote never closed) or, with no
    quote at all, a flagged silence."""
    code, record = play(tmp_path, server.base_url, {"max_tokens_message": 3})
    assert code == 0
    speaks = [c for c in record["calls"] if c["action"] == "speak"]
    cut = [c for c in speaks if c["finish_reason"] == "length"]
    assert cut and all(c["output_tokens"] == 3 for c in cut)
    assert all(c["output_tokens"] <= 3 for c in speaks)
    messages = [e for e in record["events"] if e["type"] in ("message", "silence")]
    assert len(messages) == len(speaks)
    for call, event in zip(speaks, messages, strict=True):
        if call["parse"].get("cut"):
            assert event["type"] == "message" and event["truncated"]
        else:
            assert call["parse"]["format_failure"] and event["type"] == "silence" and event["format_failure"]


def test_an_empty_answer_is_a_flagged_silence_or_random_vote(tmp_path: Path) -> None:
    """llama-server's default sampling with `<eos>` forced first (`--logit-bias`): every answer is "" with
    finish_reason `stop`. Each is read by the failure policy, never as a message or a chosen vote."""
    with start_server(tmp_path, slots=1, ctx_per_slot=4096, extra=("--logit-bias", f"{GEMMA_EOS}+100")) as mute:
        code, record = play(tmp_path, mute.base_url)
    assert code == 0
    assert record["calls"] and all(c["response"] == "" and c["finish_reason"] == "stop" for c in record["calls"])
    assert all(c["parse"]["format_failure"] for c in record["calls"])
    kinds = {e["type"] for e in record["events"] if e["format_failure"]}
    assert kinds == {"silence", "vote"}
    assert not [e for e in record["events"] if e["type"] == "message"]
    assert all(e["random_fallback"] for e in record["events"] if e["format_failure"])


def test_server_killed_mid_study_the_study_resumes_and_completes(tmp_path: Path) -> None:
    """SIGKILL the server once the first shard has landed: the run ends completed-with-failures (exit 3), the
    unfinished games landed as failed; after a restart on the same port the re-run replays only those, and every
    planned game ends finished, once."""
    require_installed()
    warehouse = tmp_path / "w.duckdb"
    srv = start_server(tmp_path, slots=2, ctx_per_slot=4096)
    try:
        port = srv.port
        (tmp_path / "study.toml").write_text(
            mini_mafia_study(
                srv.base_url,
                warehouse,
                name="killed",
                games=8,
                detector=False,
                rounds=0,
                agents=f'{{ mafioso = "{SPEC}", default = "policy/random" }}',
                shard_size=2,
                concurrency="games = 2",
                settings={"max_attempts": 2, "backoff_base_s": 0.2},
            )
        )
        done = threading.Event()
        result: dict[str, object] = {}

        def run() -> None:
            result["first"] = cli("run", "study.toml", "--no-prefect", "--no-progress", cwd=tmp_path)
            done.set()

        thread = threading.Thread(target=run)
        thread.start()
        deadline = time.monotonic() + 600
        while not done.is_set() and not list(tmp_path.glob("**/raw/killed/*.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not done.is_set(), "the study finished before the server could be killed"
        srv.kill()
        thread.join(900)
        first = result["first"]
        assert first.returncode == 3, first.stdout + first.stderr  # type: ignore[attr-defined]
        with duckdb.connect(str(warehouse), read_only=True) as con:
            failed = con.execute("select count(*) from raw_games where status = 'failed'").fetchone()[0]  # type: ignore[index]
        assert failed > 0
        srv = start_server(tmp_path, slots=2, ctx_per_slot=4096, port=port)
        second = cli("run", "study.toml", "--no-prefect", "--no-progress", cwd=tmp_path)
        assert second.returncode == 0, second.stdout + second.stderr
    finally:
        srv.stop()
    with duckdb.connect(str(warehouse), read_only=True) as con:
        rows = con.execute("select status, count(*), count(distinct game_id) from raw_games group by 1").fetchall()
        replaced = con.execute("select count(distinct game_id) from raw_replaced_calls").fetchone()[0]  # type: ignore[index]
    assert rows == [("finished", 8, 8)]
    assert replaced == failed  # the failed attempts' calls stay counted


def test_64_games_in_flight_queue_on_two_slots_and_none_is_lost(tmp_path: Path) -> None:
    """64 games in flight, one model call each at a time, against 2 slots: the server defers what it cannot
    decode (its `requests_deferred` gauge rises above 0), the client waits instead of failing, and all 64 games
    land finished, once each."""
    srv = start_server(tmp_path, slots=2, ctx_per_slot=2048)
    deferred: list[float] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                deferred.append(srv.metrics().get("requests_deferred", 0.0))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    try:
        (tmp_path / "study.toml").write_text(
            mini_mafia_study(
                srv.base_url,
                tmp_path / "w.duckdb",
                name="in-flight",
                games=64,
                detector=False,
                rounds=0,
                agents=f'{{ mafioso = "{SPEC}", default = "policy/random" }}',
                shard_size=64,
                concurrency="games = 64\ndefault_provider = 64",
                settings={"timeout_s": 1200, "max_attempts": 1},
            )
        )
        watcher.start()
        run = cli("run", "study.toml", "--no-prefect", "--no-progress", cwd=tmp_path)
    finally:
        stop.set()
        if watcher.is_alive():
            watcher.join()
        srv.stop()
    assert run.returncode == 0, run.stdout + run.stderr
    assert max(deferred) > 0, "the server never queued: fewer requests in flight than slots"
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        rows = con.execute("select status, count(*), count(distinct game_id) from raw_games group by 1").fetchall()
        calls = con.execute("select count(*), max(attempts) from raw_model_calls").fetchone()
    assert rows == [("finished", 64, 64)]
    assert calls == (64, 1)  # one vote per game, no retry: the queue held them

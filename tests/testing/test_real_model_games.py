"""A real model end to end (issue 28): llama.cpp's llama-server with Gemma 3 270M, reached through an ordinary
`[endpoints.llamacpp]` table, plays one Mini-Mafia game with the reference prompt, a classic game with belief
reports, an asynchronous game and a 12-game Mini-Mafia study with `--publish`, with the Mafia Detector over each;
everything lands, builds, passes the gate and renders.

The assertions are facts of the pipeline, not of the model: every call carries the server's own token counts and
finish reason, every answer the parser refused is read by the engine's failure policy (a flagged silence, a flagged
random vote, a uniform belief, the scheduler's fallback, a detector's random fill), and the preview's token estimate
stays within 20% of the server's tokenizer. The model's own figures are in BENCHMARKS.md."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from mafiabench.backends.fake import estimate_tokens
from mafiabench.testing.llama_server import LlamaServer
from support.real_model import (
    SPEC,
    async_study,
    classic_study,
    cli,
    mini_mafia_game,
    mini_mafia_study,
    start_server,
)

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    srv = start_server(tmp_path_factory.mktemp("llama"), slots=2, ctx_per_slot=4096)
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def landed(server: LlamaServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The classic and async games (each with its detector), then the 12-game study with --publish, in one
    warehouse: the publish builds and gates what all three landed."""
    home = tmp_path_factory.mktemp("real-model")
    warehouse = home / "w.duckdb"
    for name, text in (
        ("classic.toml", classic_study(server.base_url, warehouse)),
        ("async.toml", async_study(server.base_url, warehouse)),
    ):
        (home / name).write_text(text)
        run = cli("run", name, "--no-prefect", "--no-progress", cwd=home)
        assert run.returncode == 0, run.stdout + run.stderr
    (home / "study.toml").write_text(mini_mafia_study(server.base_url, warehouse))
    run = cli("run", "study.toml", "--publish", "--no-progress", cwd=home)
    assert run.returncode == 0, run.stdout + run.stderr
    return home


def query(home: Path, sql: str) -> list[tuple]:  # type: ignore[type-arg]
    with duckdb.connect(str(home / "w.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_one_mini_mafia_game_with_the_reference_prompt(server: LlamaServer, tmp_path: Path) -> None:
    (tmp_path / "game.toml").write_text(mini_mafia_game(server.base_url))
    play = cli("play", "--config", "game.toml", "--out", "game.json", cwd=tmp_path)
    assert play.returncode == 0, play.stdout + play.stderr
    record = json.loads((tmp_path / "game.json").read_text())
    calls = record["calls"]
    assert record["outcome"]["status"] == "finished"
    assert record["prompt"]["version"] == "mini-mafia/v4.1-full"
    assert len(calls) >= 7  # 2 rounds x 3 living players + 3 votes (a silent round still asks)
    for call in calls:
        assert call["provider"] == "llamacpp" and call["model"] == "gemma-3-270m"
        assert call["input_tokens"] > 100  # the server's usage, read
        assert call["output_tokens"] >= 1 or call["response"] == ""
        assert call["finish_reason"] in ("stop", "length")
        assert call["latency_ms"] > 0 and call["attempts"] == 1


def test_everything_lands_builds_passes_the_gate_and_renders(landed: Path) -> None:
    games = dict(query(landed, "select variant, count(*) from raw_games where status = 'finished' group by 1"))
    assert games == {"mini-mafia": 12, "classic": 1, "async": 1}
    assert query(landed, "select count(*) from raw_games where status <> 'finished'") == [(0,)]
    # the detector read every game, each at one cut per day at least (a game ending at night adds a cut)
    unread = query(
        landed,
        "select count(*) from raw_games g where not exists "
        "(select 1 from raw_detections d where d.game_id = g.game_id)",
    )
    assert unread == [(0,)]
    short = query(
        landed,
        "select count(*) from raw_games g where days > "
        "(select count(distinct cut) from raw_detections d where d.game_id = g.game_id)",
    )
    assert short == [(0,)]
    assert query(landed, "select distinct detector from raw_detections") == [(SPEC,)]
    # gate passed, marts published, pages rendered from them
    (pages,) = {p.parent for p in landed.glob("dashboards*/index.html")}  # named after the warehouse
    assert (pages / "detector.html").is_file() and (pages / "strategema.html").is_file()
    assert query(landed, "select count(*) from mart_game_costs")[0][0] >= 14


def test_every_call_carries_the_servers_counts(landed: Path) -> None:
    rows = query(
        landed,
        "select count(*), count(*) filter (where input_tokens > 0 and (output_tokens > 0 or response_text = '') "
        "and finish_reason in ('stop', 'length') and latency_ms > 0) from raw_model_calls",
    )
    total, complete = rows[0]
    assert total > 100 and complete == total
    # a `length` finish spent exactly its cap: the cap was sent as max_tokens and the server honoured it
    over = query(
        landed,
        "select count(*) from raw_model_calls where finish_reason = 'length' and output_tokens <> "
        "cast(json_extract(request_json, '$.settings.max_tokens') as bigint)",
    )
    assert over == [(0,)]


def test_each_refused_answer_is_read_by_the_failure_policy(landed: Path) -> None:
    """Speak: a flagged silence; vote/kill/investigate: a flagged random choice; belief: a flagged uniform
    distribution; schedule: the scheduler's fallback; detect: a random fill. One flagged outcome per refused answer."""

    def calls(where: str) -> int:
        return int(
            query(
                landed,
                "select count(*) from raw_model_calls c join raw_games g using (game_id) "
                f"where c.format_failure and {where}",
            )[0][0]
        )

    def events(where: str) -> int:
        return int(
            query(
                landed,
                "select count(*) from raw_events e join raw_games g using (game_id) "
                f"where e.format_failure and {where}",
            )[0][0]
        )

    assert calls("true") > 0  # a base model: refusals are certain, and each must be read
    assert calls("action = 'speak'") == events("type = 'silence' and random_fallback")
    assert events("type = 'silence' and text not like '% remained silent.'") == 0
    assert calls("action = 'schedule'") == events("type = 'schedule'")
    choice = "variant <> 'classic' and action in ('vote', 'kill', 'investigate')"
    assert calls(choice) == events(choice.replace("action", "type") + " and random_fallback")
    # beliefs: a refused answer is a flagged belief event whose distribution is uniform (a parsed but unusable one
    # is flagged too, so at least as many events as refused calls)
    assert calls("variant = 'classic' and action <> 'speak'") <= events("type = 'belief' and random_fallback")
    uneven = query(
        landed,
        "select count(*) from (select game_id, seq from raw_beliefs where uniform_fallback "
        "group by 1, 2 having max(probability) - min(probability) > 1e-9)",
    )
    assert uneven == [(0,)]
    short = query(landed, "select count(*) from raw_detections where format_failure and not random_fallback")
    assert short == [(0,)]
    assert query(landed, "select count(*) from raw_detections where len(predicted) <> k") == [(0,)]


def test_preview_token_estimate_within_20_percent_of_the_servers(landed: Path, server: LlamaServer) -> None:
    """The preview counts a prompt as len/4 tokens; the server counts the chat-templated prompt with Gemma's own
    tokenizer. Over all calls the two agree within 20%."""
    rows = query(landed, "select request_json, input_tokens from raw_model_calls")
    estimated = sum(estimate_tokens(json.loads(r)["messages"][0]["content"]) for r, _ in rows)
    counted = sum(n for _, n in rows)
    assert abs(estimated - counted) / counted < 0.20, (estimated, counted)
    # and the server's count is its tokenizer's plus the chat template's tokens
    request, tokens = rows[0]
    plain = server.tokenize(json.loads(request)["messages"][0]["content"])
    assert 0 < tokens - plain <= 40, (tokens, plain)  # 24 measured: Gemma's turn markers, BOS

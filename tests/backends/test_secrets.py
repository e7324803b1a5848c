"""A key in a custom `api_key_env` variable, echoed by a hostile server in its errors and its answers, is nowhere in
what a run leaves behind: raw records, the DuckDB warehouse (every text column), dashboards, Prefect's home (its
database and logs), stdout and stderr.

The value does not look like a key (no `sk-`, short, no key-ish variable name), so only the configuration naming the
variable, and the backends registering what they send, can catch it. The server's own request log proves the value
was really sent and echoed (the test can fail)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from mafiabench.redact import MASK, install_log_scrubber, redact, scrub, secret_env, secret_value
from mafiabench.testing import FakeModelServer

ROOT = Path(__file__).resolve().parents[2]
SECRET = "tangerine-Walrus-42"  # not key-shaped: only the configuration says it is a secret

EXPERIMENT = """
name = "leak"
games_per_cell = 4
shard_size = 2
warehouse = "{warehouse}"

[[cells]]
name = "box"
agents = {{ mafioso = "gpu-box/qwen", detective = "gpu-box/qwen", villager = "policy/informed" }}

[[cells]]
name = "box-all"
agents = {{ default = "gpu-box/qwen" }}

[[cells]]
name = "baseline"
agents = {{ mafioso = "policy/random", detective = "policy/informed", villager = "policy/random" }}
games = 30

[endpoints.gpu-box]
kind = "{kind}"
base_url = "{base_url}"
api_key_env = "GPU_BOX_AUTH"

[models.default]
max_attempts = 2
backoff_base_s = 0.001
timeout_s = 5
"""


def test_scrub_masks_configured_and_sent_values_whatever_their_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZZ_BOX_VAR", "plain words 77")
    assert scrub("see plain words 77 here") == "see plain words 77 here"  # not yet named as a secret
    secret_env("ZZ_BOX_VAR")
    assert scrub("see plain words 77 here") == f"see {MASK} here"
    secret_value("credential-sent-once")
    assert redact("x credential-sent-once y") == f"x {MASK} y"
    assert scrub("Alice voted for Bob") == "Alice voted for Bob"


def test_log_records_are_scrubbed_message_and_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import logging

    secret_value("walrus-in-a-log")
    install_log_scrubber()
    stream = io.StringIO()
    logger = logging.getLogger("mafiabench.test.secrets")
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    try:
        logger.warning("refused %s", "walrus-in-a-log")
        try:
            raise RuntimeError("bad key walrus-in-a-log")
        except RuntimeError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    out = stream.getvalue()
    assert "walrus-in-a-log" not in out and "refused [redacted]" in out and "bad key [redacted]" in out


def _all_files(*roots: Path) -> list[Path]:
    return [p for r in roots if r.exists() for p in r.rglob("*") if p.is_file()]


def _text_cells_with(warehouse: Path, needle: str) -> list[str]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        hits = []
        for (table,) in con.execute("select table_name from information_schema.tables").fetchall():
            cols = [r[0] for r in con.execute(f'describe "{table}"').fetchall()]
            for col in cols:
                sql = f'select count(*) from "{table}" where cast("{col}" as varchar) like $p'
                n = con.execute(sql, {"p": f"%{needle}%"}).fetchone()
                if n and n[0]:
                    hits.append(f"{table}.{col}")
        return hits
    finally:
        con.close()


@pytest.mark.slow
@pytest.mark.parametrize("kind,prefect", [("openai", True), ("anthropic", False)])
def test_an_echoed_custom_key_is_nowhere_after_a_run(
    tmp_path: Path, kind: str, prefect: bool, prefect_home: Callable[[Path], Path]
) -> None:
    warehouse = tmp_path / "wh" / "w.duckdb"
    dashboards = tmp_path / "dash"
    home = prefect_home(tmp_path / "prefect-home") if prefect else tmp_path / "prefect-home"
    exp = tmp_path / "leak.toml"
    with FakeModelServer(latency_s=0.0, seed=5) as srv:
        srv.echo_credentials = True
        srv.error_message = "Incorrect API key provided"
        srv.set_rates(**{"401": 0.04, "500": 0.1})
        base = srv.base_url_openai if kind == "openai" else srv.base_url_anthropic
        exp.write_text(EXPERIMENT.format(warehouse=warehouse, kind=kind, base_url=base))
        env = {
            **os.environ,
            "GPU_BOX_AUTH": SECRET,
            "PYTHONPATH": str(ROOT / "src"),
            "PREFECT_HOME": str(home),
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300",  # a loaded CI machine starts it slowly
        }
        cmd = [sys.executable, "-m", "mafiabench.cli", "run", str(exp), "--publish", "--no-progress",
               "--dashboards", str(dashboards)]
        if not prefect:
            cmd.append("--no-prefect")
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        echoed = [r for r in srv.requests if SECRET in str(r["response"])]
        statuses = {r["status"] for r in srv.requests}
    assert proc.returncode in (0, 3), proc.stderr[-3000:]
    # the server really received the key and echoed it in answers and in errors
    assert echoed and {200, 401, 500} <= statuses
    assert (dashboards / "index.html").is_file() and list((warehouse.parent / "raw" / "leak").glob("*.jsonl"))
    if prefect:
        assert (home / "mafiabench-server").is_dir(), "the Prefect path ran with its home here"
    assert SECRET not in proc.stdout and SECRET not in proc.stderr
    leaked = [str(p) for p in _all_files(tmp_path) if SECRET.encode() in p.read_bytes()]
    assert leaked == []
    assert _text_cells_with(warehouse, SECRET) == []
    # the answers were kept, masked: the redaction is visible, not a dropped record
    assert "box" in proc.stdout
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        sql = "select count(*) from raw_model_calls where response_text like $p"
        masked = con.execute(sql, {"p": f"%{MASK}%"}).fetchone()
    finally:
        con.close()
    assert masked and masked[0] > 0

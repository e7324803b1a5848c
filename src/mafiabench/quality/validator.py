"""The gate's Great Expectations validator, in this process or in a helper process beside the build.

GX 1.24 cannot validate DuckDB through SQLAlchemy (every expectation fails upstream), so the gate pulls each suite's
rows into a DataFrame and validates it through an ephemeral context (no files, no network): `_Validator`.

`import great_expectations` and its context cost 2-3 s of single-threaded Python, so a build does them in a helper
process started as the build starts (`start_validator`): they run beside the models' build on the other core instead
of after it (1M games: the build 1-3 s shorter, BENCHMARKS.md). The helper only validates the frames it is sent; the
warehouse keeps its one connection in the build's process. Should the helper die, the build's process validates.
"""

from __future__ import annotations

import atexit
import math
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from mafiabench.quality.suites import Suite

SAMPLE_ROWS = 5

@dataclass
class ExpectationResult:
    suite: str
    expectation: str  # GX expectation type, or the assert file's name
    rule: str  # what the expectation means, in words
    kwargs: dict[str, Any]
    success: bool
    element_count: int
    unexpected_count: int
    failing_rows: list[dict[str, Any]] = field(default_factory=list)

    def describe(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"{self.rule} [{self.suite}: {self.expectation}({args})]"


def _json_safe(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if hasattr(value, "tolist"):  # numpy scalars and arrays (a list column)
        return _json_safe(value.tolist())
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return str(value)


def _rows(df: Any, index: Sequence[Any] | None = None, limit: int = SAMPLE_ROWS) -> list[dict[str, Any]]:
    part = df.loc[list(index)[:limit]] if index is not None else df.head(limit)
    return [{k: _json_safe(v) for k, v in rec.items()} for rec in part.to_dict(orient="records")]



class _Validator:
    """An ephemeral GX context with one pandas datasource; one asset per suite."""

    def __init__(self) -> None:
        os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self.gx = gx
        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        self.source = self.context.data_sources.add_pandas("mafiabench")

    def submit(self, suite: Suite, df: Any, element_count: int | None = None) -> Future[list[ExpectationResult]]:
        """`validate`, done now (the helper process's `submit` returns before GX has answered)."""
        done: Future[list[ExpectationResult]] = Future()
        try:
            done.set_result(self.validate(suite, df, element_count))
        except Exception as exc:
            done.set_exception(exc)
        return done

    def validate(self, suite: Suite, df: Any, element_count: int | None = None) -> list[ExpectationResult]:
        """Validate `df`; `element_count` is the suite's full row count when `df` holds only its candidate rows."""
        gx = self.gx
        asset = self.source.add_dataframe_asset(name=suite.name)
        try:
            return self._validate(gx, asset, suite, df, element_count)
        finally:
            self.source.delete_asset(suite.name)  # the context outlives a build in the gate's helper process

    def _validate(
        self, gx: Any, asset: Any, suite: Suite, df: Any, element_count: int | None
    ) -> list[ExpectationResult]:
        batch = asset.add_batch_definition_whole_dataframe(f"{suite.name}_all").get_batch(
            batch_parameters={"dataframe": df}
        )
        # GX reorders results (by column); `meta.check` ties each result back to its check.
        expectations = [
            getattr(gx.expectations, c.expectation)(**c.kwargs, meta={"check": i}) for i, c in enumerate(suite.checks)
        ]
        gx_suite = gx.ExpectationSuite(name=suite.name, expectations=expectations)
        report = batch.validate(
            gx_suite, result_format={"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE_ROWS}
        )
        out: list[ExpectationResult] = []
        for res in sorted(report.results, key=lambda r: int((r.expectation_config.meta or {})["check"])):
            check = suite.checks[int(res.expectation_config.meta["check"])]
            info = res.result or {}
            if check.expectation == "ExpectTableRowCountToEqual":
                unexpected = len(df) if not res.success else 0
                sample = _rows(df) if not res.success else []
            else:
                unexpected = int(info.get("unexpected_count") or 0)
                idx = info.get("partial_unexpected_index_list") or []
                sample = _rows(df, idx) if idx else []
            if res.exception_info and res.exception_info.get("raised_exception"):
                unexpected = unexpected or -1
                sample = [{"exception": str(res.exception_info.get("exception_message"))}]
            out.append(
                ExpectationResult(
                    suite=suite.name,
                    expectation=res.expectation_config.type,
                    rule=check.rule,
                    kwargs=dict(check.kwargs),
                    success=bool(res.success),
                    element_count=len(df) if element_count is None else element_count,
                    unexpected_count=unexpected,
                    failing_rows=sample,
                )
            )
        return out


def serve_validator() -> None:
    """The helper's loop (`python -c "...serve_validator()"`): load GX, then validate each (suite, frame, count) read
    from stdin and answer on what was stdout; anything GX prints goes to stderr. Ends when its parent goes (EOF)."""
    answers = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    requests = Connection(os.dup(0), writable=False)
    validator = _Validator()
    while True:
        try:
            suite, df, element_count = requests.recv()
        except EOFError:
            return
        try:
            answers.send(("ok", validator.validate(suite, df, element_count)))
        except Exception as exc:  # the build's process validates this suite again itself, and raises what GX raises
            answers.send(("error", repr(exc)))


class ValidatorProcess:
    """`_Validator` in a helper process: a fresh interpreter that imports only this module (not the caller's main
    script, as multiprocessing's spawn would), loading GX as soon as it starts. `validate` sends it a suite and its
    frame. A suite GX fails on there is validated again in this process (which raises what GX raises); the helper
    serves on. A helper that cannot start, dies, or gives no answer within `answer_timeout` seconds (stopped, stuck)
    is let go (killed if need be), and from then on this process validates."""

    answer_timeout = 300.0  # importing GX takes seconds; a suite's frame, well under one

    def __init__(self) -> None:
        self._local: _Validator | None = None
        self._lock = threading.Lock()
        self._sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gx-helper")
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])  # the folder holding `mafiabench`
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        env.setdefault("GX_ANALYTICS_ENABLED", "false")
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-c", "from mafiabench.quality.validator import serve_validator; serve_validator()"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            )
        except OSError:
            self._proc = None
            return
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._requests = Connection(os.dup(self._proc.stdin.fileno()), readable=False)
        self._answers = Connection(os.dup(self._proc.stdout.fileno()), writable=False)

    @property
    def pid(self) -> int | None:
        """The helper's process id while it serves (None once it is gone or never started)."""
        return self._proc.pid if self._proc is not None else None

    def submit(self, suite: Suite, df: Any, element_count: int | None = None) -> Future[list[ExpectationResult]]:
        """`validate` on this helper's own thread, in order: the gate pulls the next suite's rows from DuckDB while
        GX checks the last ones (1M games: 0.7 s of GX off the gate's time)."""
        return self._sender.submit(self.validate, suite, df, element_count)

    def validate(self, suite: Suite, df: Any, element_count: int | None = None) -> list[ExpectationResult]:
        with self._lock:
            if self._proc is not None:
                try:
                    self._requests.send((suite, df, element_count))
                    if not self._answers.poll(self.answer_timeout):
                        raise TimeoutError(f"no answer from the GX helper in {self.answer_timeout:g} s")
                    status, answer = self._answers.recv()
                    if status == "ok":
                        return answer
                except (OSError, EOFError) as exc:  # the helper died or hangs: from now on, this process validates
                    self.close(kill=isinstance(exc, TimeoutError))
            if self._local is None:
                self._local = _Validator()
            return self._local.validate(suite, df, element_count)

    def close(self, *, wait: bool = True, kill: bool = False) -> None:
        """Stop the helper: it ends on EOF, awaited (killed if it has not within a few seconds) unless `wait` is
        false, as when this process exits (its teardown of GX then costs this process nothing); `kill` for a helper
        that stopped answering."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if kill:
            proc.kill()
        for conn in (self._requests, self._answers):
            conn.close()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        if not wait:
            return
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_HELPER: ValidatorProcess | None = None
_HELPER_LOCK = threading.Lock()


def start_validator() -> ValidatorProcess:
    """This process's GX helper, started on first use and kept for later builds (a study's builds, a test
    session): a new one only when the last one is gone."""
    global _HELPER
    with _HELPER_LOCK:
        if _HELPER is None or _HELPER.pid is None:
            _HELPER = ValidatorProcess()
        return _HELPER


@atexit.register
def _stop_helper() -> None:
    if _HELPER is not None:
        _HELPER.close(wait=False)



def json_safe_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows (e.g. a dbt data test's violating rows) as JSON-safe dicts for `validation_results`."""
    return [{k: _json_safe(v) for k, v in row.items()} for row in rows]


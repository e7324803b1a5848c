"""A game cancelled in a worker process before its task first runs is still answered.

A failing shard cancels its other games (`ShardExecutor.play_shard`), and `WorkerPool.play` then waits for each one's
reply, so that a retry never overlaps it. When the "play" and the "cancel" of one game reach a worker together (a
shard that fails right after handing out its games, on a loaded machine), the worker's event loop created the game's
task and cancelled it before its first step: the coroutine never entered its `try`, no reply was sent, and the run
waited for ever (seen once in `test_a_killed_worker_fails_its_shard_which_is_retried` under a full suite: every game
answered but one, both workers and the parent idle)."""

from __future__ import annotations

import concurrent.futures

from mafiabench.backends.endpoints import EndpointConfig
from mafiabench.play.runner import GameSpec
from mafiabench.record import Provenance
from mafiabench.study.workers import WorkerConfig, WorkerPool


def test_play_and_cancel_sent_together_are_answered() -> None:
    config = WorkerConfig(endpoints={"slow": EndpointConfig("slow", "fake", options={"latency_ms": 50})}, limits={},
                          default_limit=8, cache_dir=None, provenance=Provenance(git_commit=None), processes=1)
    pool = WorkerPool(config)
    try:
        pool.start()
        worker = pool._workers[0]
        assert worker is not None
        replies = []
        for i in range(30):
            spec = GameSpec.build(f"g{i}", "mini-mafia", None, i, {"default": "slow/m"})
            reply: concurrent.futures.Future = concurrent.futures.Future()
            worker.send(("play", i, spec), reply)
            worker.send(("cancel", i, None))  # at once: the worker reads both before the game's task runs
            replies.append(reply)
        kinds = [r.result(timeout=60)[0] for r in replies]  # the old worker left some unanswered: a timeout here
        assert set(kinds) <= {"cancelled", "ok"} and "cancelled" in kinds
    finally:
        pool.close()

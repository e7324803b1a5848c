"""A replay runs the recorded nodes on as many threads as dbt had (transform.build.replay `_in_dependency_order`):
a node starts only once the nodes it depends on finished, never more at once than the threads, the ready ones in
the record's order (dbt's start order); an error starts nothing more and waits for what runs."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from mafiabench.transform.build import replay

# a -> b -> d, a -> c, e alone (the record's order: dbt's start order)
NODES = [{"uid": "a", "after": []}, {"uid": "e", "after": []}, {"uid": "b", "after": ["a"]},
         {"uid": "c", "after": ["a", "source.not_a_node"]}, {"uid": "d", "after": ["b", "c"]}]


class Log:
    def __init__(self, seconds: dict[str, float], fail: str | None = None) -> None:
        self.seconds, self.fail = seconds, fail
        self.events: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0

    def run(self, node: dict[str, Any]) -> Any:
        with self.lock:
            self.events.append(("start", node["uid"]))
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(self.seconds.get(node["uid"], 0.02))
        with self.lock:
            self.running -= 1
            self.events.append(("end", node["uid"]))
        if node["uid"] == self.fail:
            raise replay.ReplayMismatch(f"{node['uid']} failed")
        return f"result of {node['uid']}"


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_each_node_starts_after_its_upstream_and_no_more_run_than_the_threads(threads: int) -> None:
    log = Log({"a": 0.05, "e": 0.15})
    got = list(replay._in_dependency_order(NODES, log.run, threads))
    assert sorted(n["uid"] for n, _ in got) == ["a", "b", "c", "d", "e"]
    assert all(result == f"result of {n['uid']}" for n, result in got)
    at = {event: i for i, event in enumerate(log.events)}
    for node in NODES:
        for up in node["after"]:
            if up in {n["uid"] for n in NODES}:
                assert at[("end", up)] < at[("start", node["uid"])]
    assert log.most == min(threads, 3)  # e runs beside a, then beside b and c
    if threads == 1:  # one after the other, in the record's order
        assert [uid for kind, uid in log.events if kind == "start"] == ["a", "e", "b", "c", "d"]
    else:  # a and e at once; b and c once a finished (e still running with 3 threads)
        assert [uid for kind, uid in log.events if kind == "start"][:2] == ["a", "e"]


def test_a_record_without_dependencies_runs_in_its_order() -> None:
    log = Log({})
    nodes = [{"uid": n["uid"]} for n in NODES]
    assert [n["uid"] for n, _ in replay._in_dependency_order(nodes, log.run, 2)] == ["a", "e", "b", "c", "d"]
    assert log.most == 1


def test_an_error_starts_nothing_more_and_waits_for_what_runs() -> None:
    log = Log({"a": 0.02, "e": 0.3}, fail="a")
    with pytest.raises(replay.ReplayMismatch, match="a failed"):
        list(replay._in_dependency_order(NODES, log.run, 2))
    assert ("end", "e") in log.events  # waited for
    assert {uid for kind, uid in log.events if kind == "start"} == {"a", "e"}  # b, c, d never started

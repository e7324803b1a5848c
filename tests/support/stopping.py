"""An experiment with a [stopping] section over two policy cells of known win rates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mafiabench.study.spec import parse_experiment


def stopping_experiment(tmp_path: Path, **stopping: Any) -> Any:
    return parse_experiment(
        {
            "name": "adaptive",
            "shard_size": 40,
            "cells": [
                {"name": "random", "agents": {"default": "policy/random"}},  # mafia wins 2/3 (mafiabench baseline)
                {"name": "informed", "agents": {"detective": "policy/informed", "default": "policy/random"}},  # 5/12
            ],
            "stopping": {"half_width": 0.08, "min_games": 60, "wave": 60, "max_games": 3000, **stopping},
            "warehouse": str(tmp_path / "w.duckdb"),
        },
        "<test>",
    )

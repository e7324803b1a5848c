"""Fits that do not repeat (issue 37 item 1): a fit's result kept in the user's cache, named by the hash of all it
depends on (its input rows, its settings, the code that computes it and the libraries' versions), and read back by a
later build with the same key instead of fitting again. The latent model's NUTS fits (`latent-fits/`) and the
leaderboard's fits (`rating-fits/`) both keep theirs here.

A file is our own, written whole or not at all (a temporary file renamed into place) and named by its content's key;
one that cannot be read is refit, and a cache that cannot be written costs a refit next time, never the build.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from collections.abc import Iterable, Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def folder(name: str) -> Path:
    from mafiabench.transform.build.dbt_runner import cache_dir  # the one home of the cache folder's rule

    return cache_dir(name)


def code_key(sources: Mapping[str, str | Path], libraries: Iterable[str]) -> dict[str, str]:
    """What changes a fit besides its rows and settings: the source files that compute it (each named by its label,
    by content) and the versions of the libraries it calls."""
    out = {label: hashlib.sha256(Path(path).read_bytes()).hexdigest() for label, path in sources.items()}
    return out | {lib: version(lib) for lib in libraries}


def key(payload: Any) -> str:
    """The hash of a fit's identity (JSON of its rows, settings and `code_key`; keys sorted)."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def load(name: str, digest: str, kind: type[T]) -> T | None:
    """The fit kept under `digest` in the cache folder `name`, if it is there whole and of `kind`."""
    path = folder(name) / f"{digest}.pickle"
    try:
        with path.open("rb") as f:
            value = pickle.load(f)  # our own file in the user's cache, named by its content's key
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError, TypeError):
        return None
    return value if isinstance(value, kind) else None


def store(name: str, digest: str, value: object) -> None:
    where = folder(name)
    try:
        where.mkdir(parents=True, exist_ok=True)
        tmp = where / f".{digest}.{os.getpid()}.tmp"
        tmp.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        tmp.replace(where / f"{digest}.pickle")  # whole or absent: a killed build never leaves half a fit
    except OSError:
        pass

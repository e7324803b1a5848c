"""Record/replay cache: a request seen before is answered from disk, so re-running a study costs nothing.

The key is the sha256 of everything that decides an answer: provider, model, messages, recorded settings and the
replay key (game id + decision), so two identical prompts in different games are different entries. One JSON file
per entry, written to a temporary file and renamed, so a killed run never leaves a half-written entry and
concurrent writers of the same entry cannot corrupt it. Failures are never cached.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .backend import Backend, Completion, GenerateSettings, Message

CACHE_FORMAT = 1


def cache_key(
    provider: str,
    model: str,
    messages: Sequence[Message],
    settings: GenerateSettings,
    request_format: dict[str, Any] | None = None,
) -> str:
    """`request_format`: how the backend turns the messages into its request, when not as chat messages (a plain
    completion in a template): another template is another prompt, so another entry."""
    payload: dict[str, Any] = {
        "provider": provider,
        "model": model,
        "messages": [m.to_dict() for m in messages],
        "settings": settings.to_dict(),
        "replay_key": settings.replay_key,
    }
    if request_format is not None:
        payload["request_format"] = request_format
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CachingBackend:
    """Wraps any backend; `hits` and `misses` count what it did (useful in tests and run summaries)."""

    def __init__(self, inner: Backend, cache_dir: str | os.PathLike[str]) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.model = inner.model
        self.request_format: dict[str, Any] | None = getattr(inner, "request_format", None)
        self.cache_dir = Path(cache_dir)
        self.hits = 0
        self.misses = 0

    def path_for(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.json"

    def _load(self, path: Path) -> Completion | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None  # unreadable entry: treat as a miss; the next write replaces it
        if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
            return None
        fields: dict[str, Any] = data.get("completion", {})
        try:
            return Completion(**fields)
        except TypeError:
            return None

    def _store(self, path: Path, completion: Completion) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"format": CACHE_FORMAT, "completion": asdict(completion)}
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(record, fh, ensure_ascii=False, sort_keys=True)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    async def generate(self, messages: Sequence[Message], settings: GenerateSettings) -> Completion:
        key = cache_key(self.provider, self.model, messages, settings, self.request_format)
        path = self.path_for(key)
        hit = self._load(path)
        if hit is not None:
            self.hits += 1
            hit.latency_ms = 0.0
            hit.raw = {**hit.raw, "cache": "hit"}
            return hit
        self.misses += 1
        completion = await self.inner.generate(messages, settings)
        self._store(path, completion)
        completion.raw = {**completion.raw, "cache": "miss"}
        return completion

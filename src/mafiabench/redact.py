"""Keep secrets out of records, the warehouse and logs.

Provider error messages (and, from a hostile or broken server, even answers) can echo a key. Two layers:

- `scrub(text)` removes every *known secret*: the values of the environment variables the configuration names as
  holding a key (every endpoint's `api_key_env`, the built-in providers' default key variables, registered with
  `secret_env`) and every value actually sent as a credential (`secret_value`, called by the backends when they
  hand a key to an SDK), whatever its name or shape. It is exact string replacement, cheap enough for every model
  answer and every record written.
- `redact(text)` = `scrub` + anything shaped like a key or a bearer token, and the values of variables whose name
  says they hold a secret (`*_KEY`, `*_TOKEN`, ...). For error messages (it could mangle ordinary model text).

`install_log_scrubber()` makes every log record (message and traceback) pass through `redact`, so Prefect's logs,
which its server stores in its home folder, hold no key either.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import traceback
from typing import Any

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|AUTH|CREDENTIALS?)$", re.IGNORECASE)
# `sk-` and `key-` start a key only at a word's start: `prefect.task-run.Crashed` holds no key.
_KEY_SHAPES = re.compile(
    r"(\bsk-[A-Za-z0-9_*.\-]{4,}|Bearer\s+\S+|x-api-key:\s*\S+|\bkey-[A-Za-z0-9]{16,}|[A-Za-z0-9_\-]{40,})"
)
MASK = "[redacted]"
# A credential shorter than this is not masked (masking "x" would mangle every text); local servers that accept
# any key are given a placeholder, never a real secret.
MIN_SECRET_CHARS = 4

_lock = threading.Lock()
_env_names: set[str] = set()
_values: set[str] = set()


def secret_env(name: str | None) -> None:
    """Remember that environment variable `name` holds a secret (its value, now or later, is scrubbed)."""
    if name:
        with _lock:
            _env_names.add(name)


def secret_value(value: str | None) -> None:
    """Remember a value sent as a credential."""
    if value and len(value) >= MIN_SECRET_CHARS:
        with _lock:
            _values.add(value)


def secret_env_names() -> tuple[str, ...]:
    """The names registered with `secret_env` (for a worker process, which registers them again)."""
    with _lock:
        return tuple(sorted(_env_names))


def known_secrets() -> list[str]:
    """Every known secret value, longest first (so a secret containing another is masked whole)."""
    with _lock:
        found = set(_values)
        names = list(_env_names)
    for name in names:
        v = os.environ.get(name)
        if v and len(v) >= MIN_SECRET_CHARS:
            found.add(v)
    return sorted(found, key=len, reverse=True)


def scrub(text: str) -> str:
    """Mask every known secret value in `text`."""
    if not text:
        return text
    for s in known_secrets():
        if s in text:
            text = text.replace(s, MASK)
    return text


def scrub_json(text: str, secrets: list[str] | None = None) -> str:
    """`scrub` for serialised JSON: also masks a secret in its JSON-escaped form. `secrets`: `known_secrets()`,
    when the caller has it already."""
    if not text:
        return text
    for s in known_secrets() if secrets is None else secrets:
        escaped = json.dumps(s, ensure_ascii=False)[1:-1]
        for form in {s, escaped}:
            if form in text:
                text = text.replace(form, MASK)
    return text


def scrub_obj(obj: Any) -> Any:
    """`scrub` every string inside nested dicts and lists (keys included)."""
    if isinstance(obj, str):
        return scrub(obj)
    if isinstance(obj, dict):
        return {scrub_obj(k): scrub_obj(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [scrub_obj(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(scrub_obj(v) for v in obj)
    return obj


def redact(text: str) -> str:
    text = scrub(text)
    for name, value in os.environ.items():
        if value and len(value) >= 8 and _SECRET_NAME.search(name) and value in text:
            text = text.replace(value, MASK)
    return _KEY_SHAPES.sub(MASK, text)


def short_error(error: object, limit: int = 300) -> str:
    """An error message fit to store: redacted, then cut to `limit` characters."""
    s = redact(str(error))
    return s if len(s) <= limit else s[:limit] + "..."


class _ScrubbedRecord(logging.LogRecord):
    def getMessage(self) -> str:
        return redact(super().getMessage())


_installed: list[bool] = []


def install_log_scrubber() -> None:
    """Every log record from now on, whatever its logger or handler, has its message and traceback redacted."""
    if _installed:
        return
    _installed.append(True)
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        record.__class__ = _ScrubbedRecord if type(record) is logging.LogRecord else record.__class__
        if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
            record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
        return record

    logging.setLogRecordFactory(factory)

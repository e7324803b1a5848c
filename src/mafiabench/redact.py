"""Keep secrets out of records, the warehouse and logs.

Provider error messages can echo part of a key ("Incorrect API key provided: sk-abc***xyz"); anything we store or log
about a failure goes through `redact` first. It removes the values of environment variables that look like
credentials and anything shaped like a key or a bearer token.
"""

from __future__ import annotations

import os
import re

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)
_KEY_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_*.\-]{4,}|Bearer\s+\S+|x-api-key:\s*\S+|key-[A-Za-z0-9]{16,}|[A-Za-z0-9_\-]{40,})"
)
MASK = "[redacted]"


def redact(text: str) -> str:
    for name, value in os.environ.items():
        if value and len(value) >= 8 and _SECRET_NAME.search(name) and value in text:
            text = text.replace(value, MASK)
    return _KEY_SHAPES.sub(MASK, text)


def short_error(error: object, limit: int = 300) -> str:
    """An error message fit to store: redacted, then cut to `limit` characters."""
    s = redact(str(error))
    return s if len(s) <= limit else s[:limit] + "..."

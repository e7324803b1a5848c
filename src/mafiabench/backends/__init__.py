"""Model backends: one async interface, one module per provider, chosen by `provider/model` through the registry.

The OpenAI and Anthropic backends are imported lazily (`from mafiabench.backends import OpenAIBackend` still works)
so that scripted and fake runs, and the CLI's start-up, do not pay for importing the SDKs. Providers register
themselves by kind in `base` (`@register_provider`); the registry imports none of them. May import errors and
redact only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .backend import (
    Backend,
    BackendError,
    Completion,
    ConfigError,
    GenerateSettings,
    Message,
    Role,
    TransientError,
)
from .cache import CachingBackend, cache_key
from .endpoints import BUILTIN_ENDPOINTS, EndpointConfig, aclose_clients, check_backend, resolve_backend, split_spec
from .fake import FakeBackend
from .retry import backoff_delay, call_with_retries
from .scripted_backend import ScriptedBackend

if TYPE_CHECKING:
    from .anthropic_backend import AnthropicBackend
    from .openai_backend import OpenAIBackend

__all__ = [
    "BUILTIN_ENDPOINTS",
    "AnthropicBackend",
    "Backend",
    "BackendError",
    "CachingBackend",
    "Completion",
    "ConfigError",
    "EndpointConfig",
    "FakeBackend",
    "GenerateSettings",
    "Message",
    "OpenAIBackend",
    "Role",
    "ScriptedBackend",
    "TransientError",
    "aclose_clients",
    "backoff_delay",
    "cache_key",
    "call_with_retries",
    "check_backend",
    "resolve_backend",
    "split_spec",
]


def __getattr__(name: str) -> Any:
    if name == "OpenAIBackend":
        from .openai_backend import OpenAIBackend

        return OpenAIBackend
    if name == "AnthropicBackend":
        from .anthropic_backend import AnthropicBackend

        return AnthropicBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

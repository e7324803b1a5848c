"""Provider "scripted": answers decided in advance or by a function, with no latency and no faults.

Tests and offline demos use it to drive games through the full agent path (prompt, backend, parse) with answers
they control, so their records look exactly like those of real runs. It knows no game: the `scripted/naive` provider
(answers by `mafiabench.testing.fake_model.FakeBrain`) is registered there.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

from .backend import BackendError, Completion, GenerateSettings, Message
from .fake import Answerer, estimate_tokens

Responder = Callable[[Sequence[Message], GenerateSettings], str]


class ScriptedBackend:
    """`ScriptedBackend(["Alice", '"Hi"'])` answers in order; `ScriptedBackend(fn)` answers `fn(messages)`;
    `ScriptedBackend.answering(fn)` answers `fn(messages, replay_key)`."""

    provider = "scripted"

    def __init__(
        self,
        answers: Sequence[str] | Callable[[Sequence[Message]], str],
        *,
        model: str = "custom",
    ) -> None:
        self.model = model
        self.calls = 0
        if callable(answers):
            fn = answers
            self._respond: Responder = lambda messages, settings: fn(messages)
        else:
            if isinstance(answers, str):
                raise TypeError("ScriptedBackend takes a sequence of answers, not a single string")
            queue = deque(answers)
            total = len(queue)

            def pop(messages: Sequence[Message], settings: GenerateSettings) -> str:
                if not queue:
                    raise BackendError(
                        f"scripted backend ran out of answers (all {total} used)",
                        error_class="script_exhausted",
                        attempts=1,
                    )
                return queue.popleft()

            self._respond = pop

    @classmethod
    def answering(cls, answer: Answerer, *, model: str = "custom") -> ScriptedBackend:
        """A backend whose answer is `answer(messages, replay_key)` (a fake model's, deterministic per request)."""
        backend = cls(lambda messages: "", model=model)
        backend._respond = lambda messages, settings: answer(messages, settings.replay_key)
        return backend

    async def generate(self, messages: Sequence[Message], settings: GenerateSettings) -> Completion:
        self.calls += 1
        text = self._respond(messages, settings)
        if not isinstance(text, str):
            raise BackendError(
                f"scripted answer must be a str, got {type(text).__name__}", error_class="internal", attempts=1
            )
        return Completion(
            text=text,
            input_tokens=estimate_tokens("".join(m.content for m in messages)),
            output_tokens=estimate_tokens(text),
            latency_ms=0.0,
            attempts=1,
            finish_reason="stop",
            raw={"provider": "scripted", "model": self.model, "text": text},
        )


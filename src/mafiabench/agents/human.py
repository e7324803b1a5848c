"""A person plays one seat from the terminal (`human/terminal`) against model or scripted players.

The person sees what an LLM agent would: the same rules and identity text, their own memory, then the question;
and before typing, what the engine does with a long message (cut or kept whole: `cut_messages`, whatever the
models' prompt says), and after typing, what became of it. An invalid answer is asked again (three tries), then
treated like a model's format failure, so human games are scored by the same rules. `/quit`, end of input (Ctrl-D)
or Ctrl-C abandon the game: the runner then returns an *abandoned* record (never scored) instead of a traceback.

Input is read in a daemon thread, so the other seats' calls keep running and a person who walks away never keeps the
process alive after the game has been abandoned.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO, cast

from mafiabench.agents.agent import AgentTurn, PlayerView
from mafiabench.agents.prompts import PromptSet, load_prompts, memory_lines
from mafiabench.engine.core import Answer, Decision

if TYPE_CHECKING:
    from mafiabench.backends.backend import Backend

TRIES = 3
QUIT = "/quit"


class GameAbandoned(Exception):
    """The person left the game (quit command, end of input, interrupt); the message says how."""


class HumanAgent:
    def __init__(
        self,
        spec: str = "human/terminal",
        *,
        prompts: PromptSet | None = None,
        read: Callable[[str], str] = input,
        out: TextIO | None = None,
    ) -> None:
        self.spec = spec
        self.model = spec
        self.prompts = prompts
        self.read = read
        self.out = out or sys.stdout
        self._shown = 0

    async def act(self, decision: Decision, view: PlayerView) -> AgentTurn:
        if self._shown == 0:
            self._introduce(decision, view)
        lines = memory_lines(view, self.prompts or load_prompts(view.variant))
        for line in lines[self._shown :]:
            self._say(f"  {line}")
        self._shown = max(len(lines), 1)
        if decision.action == "speak":
            limit = int(getattr(view.rules, "message_limit", 0) or 0)
            cut = bool(getattr(view.rules, "cut_messages", True))
            question = (
                f"[{view.name}] Day {decision.round}, round {decision.step}/{decision.steps}. Your message "
                f"({message_rule(limit, cut)}; empty = stay silent; {QUIT} to leave): "
            )
            text = (await self._ask(question)).strip()
            if limit and len(text) > limit:
                if cut:
                    self._say(f"  Your message has {len(text)} characters; only the first {limit} are kept: "
                              f"{text[:limit]!r}")
                else:
                    self._say(f"  Your message has {len(text)} characters, over the {limit} asked for; it is kept "
                              "whole, as these rules keep every player's (cut_messages = false).")
            return AgentTurn(Answer(text=text or None))
        verb = {"vote": "Vote to eliminate", "kill": "Choose whom to kill", "investigate": "Choose whom to investigate"}
        options = ", ".join(f"{i}) {c}" for i, c in enumerate(decision.choices, 1))
        for _ in range(TRIES):
            raw = (await self._ask(f"[{view.name}] {verb[decision.action]}: {options}\n> ")).strip()
            target = _pick(raw, decision.choices)
            if target is not None:
                if decision.mode == "belief":
                    return AgentTurn(Answer(belief={c: float(c == target) for c in decision.choices}))
                return AgentTurn(Answer(target=target))
            self._say(f"  '{raw}' is not one of the choices; answer with a number or a name ({QUIT} to leave).")
        return AgentTurn(Answer(target=None, format_failure=True))

    def _introduce(self, decision: Decision, view: PlayerView) -> None:
        self._say(f"\n=== You are {view.name}, the {view.role}. Players: {', '.join(view.players)} ===")
        rules = self._rules_text(decision, view)
        if rules:
            self._say("The rules, as the models are told them:\n")
            self._say("\n".join(f"  {line}" if line else "" for line in rules.splitlines()))
        limit = int(getattr(view.rules, "message_limit", 0) or 0)
        if limit:
            cut = bool(getattr(view.rules, "cut_messages", True))
            self._say(f"Messages, as this game's rules enforce them: {message_rule(limit, cut)}"
                      + ("" if cut else " (whatever the paragraph above says: it is the models' prompt)") + ".")
        self._say(f"(Type {QUIT} at any prompt, or press Ctrl-D, to leave; the game is then recorded as abandoned.)\n")

    def _rules_text(self, decision: Decision, view: PlayerView) -> str:
        """The shared head of the prompt an LLM agent gets for this seat: rules and identity, without the memory."""
        if self.prompts is None:
            return ""
        from mafiabench.agents.llm import LLMAgent  # the one place prompts are built; no backend is called

        prompter = LLMAgent(self.spec, cast("Backend", None), self.prompts)
        prompt, head = prompter.build_prompt(decision, view)
        return prompt[:head].strip("\n")

    async def _ask(self, question: str) -> str:
        answer = await _read_in_daemon(self.read, question)
        if answer.strip() == QUIT:
            raise GameAbandoned(f"the player typed {QUIT}")
        return answer

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)


async def _read_in_daemon(read: Callable[[str], str], question: str) -> str:
    """`read(question)` in a daemon thread: input() cannot be interrupted, and must not keep the process alive."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def hand_over(ok: bool, value: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the game already ended and its loop is closed
            loop.call_soon_threadsafe(settle, ok, value)

    def target() -> None:
        try:
            value = read(question)
        except EOFError:
            hand_over(False, GameAbandoned("end of input (Ctrl-D)"))
        except BaseException as exc:  # handed to the game's task, which decides
            hand_over(False, exc)
        else:
            hand_over(True, value)

    threading.Thread(target=target, name="human-input", daemon=True).start()
    return await future


def message_rule(limit: int, cut: bool) -> str:
    """What happens to a message over the limit, in the words the person reads before typing: the engine's rule
    (`cut_messages`), not the prompt's (the Mini-Mafia reference's prompt says messages are cut; its code cuts
    nothing)."""
    if not limit:
        return "any length"
    if cut:
        return f"at most {limit} characters: a longer one is cut to its first {limit}"
    return f"at most {limit} characters asked for; a longer one is kept whole, not cut"


def _pick(raw: str, choices: tuple[str, ...]) -> str | None:
    if raw.isdigit() and 1 <= int(raw) <= len(choices):
        return choices[int(raw) - 1]
    for c in choices:
        if c.lower() == raw.lower():
            return c
    return None

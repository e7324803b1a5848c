"""The default classic prompt (classic/v3) carries the Strategema paper's prompts (appendix A.1) information for
information: the table in docs/prompt-information.md ("Classic"), written from the appendix, is checked against the
templates, against every rendered prompt of seeded games (each role and action carries its rows and none of another
role's advice), and the other way round (the prompt says nothing the table does not map)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from mafiabench.agents.prompts import load_prompts
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.record import GameRecord

DOC = Path(__file__).parents[2] / "docs" / "prompt-information.md"
KINDS = ("villager vote", "mafioso vote", "mafioso kill", "villager speak", "mafioso speak")
# Words code joins to game data (plurals, "and") and the re-prompt (off in the paper's protocol): not prompt text.
JOINED = {"and", "nobody", "reprompt"}


def rows() -> list[tuple[str, list[str], list[str]]]:
    """(number, prompts, quoted phrases) of each row of the classic table."""
    text = DOC.read_text(encoding="utf-8")
    table = text[text.index("# Classic (Strategema) prompt"):]
    out = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 5 and re.fullmatch(r"\+?\d+", cells[0]):
            phrases = re.findall(r"`([^`]+)`", cells[4])
            assert phrases, f"row {cells[0]} quotes no phrase of ours"
            out.append((cells[0], [k.strip() for k in cells[2].split(",")], phrases))
    return out


def v3_text() -> str:
    p = load_prompts("classic", "v3")
    fragments = [v for k, v in p.fragments.items() if k not in JOINED and not k.startswith("plural_")]
    return "\n".join([*p.templates.values(), *fragments])


def pattern(phrase: str) -> re.Pattern[str]:
    """A phrase with `$placeholders` as a pattern over a rendered prompt (a placeholder is game data)."""
    parts = re.split(r"\$\w+", phrase)
    return re.compile(".+?".join(re.escape(p) for p in parts))


def test_the_table_covers_every_prompt_of_the_appendix() -> None:
    table = rows()
    numbered = [r for r in table if not r[0].startswith("+")]
    assert len(numbered) >= 30
    for kind in KINDS:
        assert sum(kind in prompts for _, prompts, _ in numbered) >= 6, kind


def test_every_quoted_phrase_is_in_the_prompt() -> None:
    ours = v3_text()
    missing = [(n, p) for n, _, phrases in rows() for p in phrases if p not in ours]
    assert missing == []


def test_the_prompt_says_nothing_the_table_does_not_map() -> None:
    rest = v3_text()
    for phrase in sorted({p for _, _, phrases in rows() for p in phrases}, key=len, reverse=True):
        rest = rest.replace(phrase, "")
    rest = re.sub(r"\$\w+", "", rest)
    leftover = [line for line in rest.splitlines()
                if re.search(r"[A-Za-z]", line) and not re.fullmatch(r"[A-Z ]+", line.strip())]
    assert leftover == []


def play(seed: int) -> GameRecord:
    spec = GameSpec.build(f"appendix-{seed}", "classic", {"n_players": 8, "n_mafia": 2, "max_days": 5}, seed,
                          {"default": "fake/appendix"})
    return asyncio.run(play_game(spec, BackendPool(), clock=lambda: "2026-01-01T00:00:00.000+00:00"))


@pytest.mark.parametrize("seed", range(3))
def test_every_rendered_prompt_carries_its_role_and_action_and_no_other_role_s_advice(seed: int) -> None:
    record = play(seed)
    assert record.prompt is not None and record.prompt["version"] == "classic/v3"
    roles = {p.name: p.role for p in record.players}
    table = [r for r in rows() if not r[0].startswith("+")]
    seen: set[str] = set()
    for call in record.calls:
        kind = f"{roles[call['player']]} {call['action']}"
        prompt = call["request"]["messages"][0]["content"]
        seen.add(kind)
        for number, prompts, phrases in table:
            for phrase in phrases:
                found = pattern(phrase).search(prompt) is not None
                if kind in prompts:
                    assert found, f"{kind} ({call['player']}, round {call['round']}): row {number} missing: {phrase}"
                elif "$" not in phrase and not any(phrase in q for _, ps, qs in table if kind in ps for q in qs):
                    assert not found, f"{kind} reads row {number}, which the appendix gives only to {prompts}"
        asks = '"mafia_probability"' in prompt
        assert asks == (kind == "villager vote"), kind  # the belief state is asked of the voting villagers only
    assert seen == set(KINDS)

"""The default Mini-Mafia prompt tells each role what the reference prompt tells it, and nothing more.

The reference is the Mini-Mafia benchmark's prompt (`bastoscostadavi/llm-mafia-game`: `src/prompt_long.txt`, the
suffixes of `src/prompt_utils.py`, the memory lines of `mini-mafia-benchmark/mini_mafia.py`); its pieces of
information are listed in `docs/prompt-information.md`, whose quoted phrases are checked here against our templates.
"""

from __future__ import annotations

import asyncio
import random
import re
import shutil
from pathlib import Path
from typing import cast

import pytest

from mafiabench.agents.agent import PlayerView
from mafiabench.agents.llm import LLMAgent
from mafiabench.agents.parsing import parse_message_reference, parse_name_reference, strip_reasoning
from mafiabench.agents.prompts import PromptSet, load_prompts, read_prompt_folder
from mafiabench.backends.backend import Backend
from mafiabench.engine import make_game
from mafiabench.engine.core import Answer, Decision
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.record import GameRecord

DOC = Path(__file__).parents[2] / "docs" / "prompt-information.md"
FIXED_CLOCK = "2026-01-01T00:00:00.000+00:00"

# The reference's memory lines (paper appendix B.2 and mini_mafia.py), by who may read them. `{n}` is any player name.
ANYONE = [
    r"Night 1 begins\.",
    r"Day 1 begins\.",
    r"{n} was found dead\.",
    r'(?:{n}|You): ".*"',
    r"(?:{n}|You): remained silent\.",
]
ONLY = {
    "mafioso": [r"You killed {n}\.", r"{n} is the detective and knows that you are the mafioso\."],
    "detective": [r"You investigated {n} and discovered that they are (?:the mafioso|a villager)\."],
    "villager": [],
}
SUFFIXES = [
    r"#DISCUSSION ROUND \d+/\d+:\nWhat message do you want to say to everyone\?\n"
    r"Begin your answer with your message in double quotation marks; reasoning may follow:\n",
    r"#VOTING TIME:\nVote to arrest one player from: {n}(?:, {n})*\.\nAnswer with just a name:\n",
    r"#NIGHT 1:\nChoose a player to (?:kill|investigate) from: {n}(?:, {n})*\.\nAnswer with just a name:\n",
]
NAME = r"(?:Alice|Bob|Charlie|Diana)"


def play(seed: int, rules: dict[str, object], version: str | None = None) -> GameRecord:
    spec = GameSpec.build(f"fidelity-{seed}", "mini-mafia", rules, seed, {"default": "scripted/naive"},
                          prompt_version=version)
    return asyncio.run(play_game(spec, BackendPool(), clock=lambda: FIXED_CLOCK))


def problems(record: GameRecord) -> list[str]:
    """Every way a prompt of this game tells a player more than (or other than) the reference tells that role."""
    roles = {p.name: p.role for p in record.players}
    mafioso = next(n for n, r in roles.items() if r == "mafioso")
    out: list[str] = []
    heads: set[str] = set()
    for call in record.calls:
        me, role = call["player"], roles[call["player"]]
        prompt = call["request"]["messages"][0]["content"]
        head, sep, rest = prompt.partition("#YOUR MEMORY:\n")
        if not sep:
            out.append(f"{me}: no #YOUR MEMORY: section")
            continue
        identity = re.search(r"- You are (\w+) and the other players are: (.+)\.\n", head)
        if identity is None or identity.group(1) != me:
            out.append(f"{me}: the identity line does not name the player")
        else:
            others = identity.group(2).split(", ")
            if sorted(others) != sorted(n for n in roles if n != me):
                out.append(f"{me}: the other players are {others}")
            heads.add(head.replace(identity.group(0), ""))
        memory, _, suffix = rest.partition("\n\n")
        if not any(re.fullmatch(s.replace("{n}", NAME), suffix) for s in SUFFIXES):
            out.append(f"{me}: unexpected action text {suffix!r}")
        lines = memory.split("\n")
        if lines[0] != f"You're {me}, the {role}.":
            out.append(f"{me}: first memory line {lines[0]!r}")
        allowed = [p.replace("{n}", NAME) for p in ANYONE + ONLY[role]]
        for line in lines[1:]:
            if not any(re.fullmatch(p, line) for p in allowed):
                out.append(f"{me} ({role}) reads {line!r}, which the reference never tells a {role}")
            spoken = re.fullmatch(r'(?:\w+|You): ".*"', line)
            if not spoken and role != "detective" and mafioso in line and "mafioso" in line:
                out.append(f"{me} ({role}) is told who the mafioso is: {line!r}")
        if role != "detective" and role != "mafioso" and re.search(rf"{mafioso}\W+(?:is|are) the mafioso", head):
            out.append(f"{me}: the rules name the mafioso")
    if len(heads) > 1:
        out.append(f"the shared part of the prompt differs between players or calls ({len(heads)} versions)")
    return out


GAMES = [
    (seed, rules)
    for seed in range(6)
    for rules in ({}, {"discussion_rounds": 0}, {"discussion_rounds": 4}, {"night": "agents"},
                  {"mafioso_knows_detective": True})
]


@pytest.mark.parametrize(("seed", "rules"), GAMES)
def test_no_player_is_told_more_than_the_reference_tells_its_role(seed: int, rules: dict[str, object]) -> None:
    record = play(seed, rules)
    assert record.prompt is not None and record.prompt["version"] == "mini-mafia/v4.1-full"
    speakers = 3 if rules.get("night", "scripted") == "scripted" else 2  # with agents the detective may be killed
    speeches = int(rules.get("discussion_rounds", 2)) * speakers  # type: ignore[call-overload]
    assert len(record.calls) >= speeches + speakers  # every discussion turn and every vote was rendered
    assert problems(record) == []


# What the first condensed rewrite (v4.1, now v4.1-condensed) told every player and the reference tells no one but the
# detective, or no one at all (the reference's game runs until one side is gone).
LEAKS = ("learns who the mafioso is", "played automatically", "one night and one day", "ends after the day's vote",
         "an innocent player is arrested", "whether they are the mafioso")
PROMPT_FOLDERS = Path(__file__).parents[2] / "src" / "mafiabench" / "agents" / "prompts" / "mini-mafia"
SHIPPED = sorted(p.name for p in PROMPT_FOLDERS.iterdir() if p.is_dir())


def told_too_much(prompts: PromptSet, seed: int, rules: dict[str, object]) -> list[str]:
    """Render every decision of a seeded game (random answers) with `prompts`: every way a player is told more than
    the reference tells its role. The rules part must be the same for every player and call once the player's own
    name, role and the others' order are taken out; the memory holds only the reference's lines for the role; no
    non-detective reads who the mafioso is or that the night was scripted."""
    rng = random.Random(seed)
    game = make_game("mini-mafia", rules, seed)
    game.reset()
    out: list[str] = []
    heads: set[str] = set()
    while not game.done:
        pending = game.pending()
        mafioso = next(p.name for p in game.players if p.role == "mafioso")
        for d in pending:
            me = game.player(d.player)
            view = PlayerView(me.name, me.role, me.team, "mini-mafia", game.rules,
                              tuple(q.name for q in game.players), tuple(game.view(me.name)))
            prompt = LLMAgent("m", cast(Backend, None), prompts, game_id=f"g{seed}").build_prompt(d, view)[0]
            head, _, rest = prompt.partition("#YOUR MEMORY:\n")
            shared = head
            for name in sorted((q.name for q in game.players), key=len, reverse=True):
                shared = shared.replace(name, "<name>")
            heads.add(re.sub(r"(<name>(, | and )?)+", "<names>", shared).replace(f"You are the {me.role}.", "<role>"))
            memory = rest.partition("\n\n")[0].split("\n")
            allowed = [p.replace("{n}", NAME) for p in ANYONE + ONLY[me.role]]
            if memory[0] != f"You're {me.name}, the {me.role}.":
                out.append(f"{me.name}: first memory line {memory[0]!r}")
            out += [f"a {me.role} reads {line!r}" for line in memory[1:]
                    if not any(re.fullmatch(p, line) for p in allowed)]
            if me.role != "detective":
                out += [f"a {me.role} is told {leak!r}" for leak in LEAKS if leak in prompt]
                if re.search(rf"{mafioso}\W+(?:is|are) the mafioso", head):
                    out.append(f"a {me.role} is told the mafioso's name")
        answers = {d.player: Answer(text="I trust nobody yet.") if d.action == "speak"
                   else Answer(target=rng.choice(d.choices)) for d in pending}
        game.step(answers)
    if len(heads) > 1:
        out.append(f"the rules part differs between players or calls ({len(heads)} versions)")
    return out


@pytest.mark.parametrize("version", SHIPPED)
@pytest.mark.parametrize(("seed", "rules"), [(1, {}), (2, {"night": "agents"}), (3, {"discussion_rounds": 1})])
def test_no_shipped_prompt_version_tells_a_player_more_than_the_reference_tells_its_role(
    version: str, seed: int, rules: dict[str, object]
) -> None:
    assert told_too_much(load_prompts("mini-mafia", version), seed, rules) == []


def test_the_check_catches_the_first_rewrite_telling_everyone_what_the_detective_learnt(tmp_path: Path) -> None:
    """A copy of v4.1-condensed with the first rewrite's rules sentences put back is caught, for every non-detective."""
    shutil.copytree(PROMPT_FOLDERS / "v4.1-condensed", tmp_path / "leaky")
    base = tmp_path / "leaky" / "base.txt"
    text = base.read_text(encoding="utf-8")
    base.write_text(text.replace("\nRESPONSE FORMATS", "This game has one night and one day. Night 1 is played "
                                 "automatically: the mafioso kills a random villager and the detective learns who "
                                 "the mafioso is. The game ends after the day's vote.\n\nRESPONSE FORMATS"),
                    encoding="utf-8")
    found = told_too_much(read_prompt_folder(tmp_path / "leaky", "mini-mafia", "leaky"), 1, {})
    assert any("a mafioso is told 'learns who the mafioso is'" in f for f in found)
    assert any("a villager is told 'one night and one day'" in f for f in found)


def test_only_the_detective_memory_names_the_mafioso() -> None:
    record = play(3, {"discussion_rounds": 1})
    roles = {p.name: p.role for p in record.players}
    mafioso = next(n for n, r in roles.items() if r == "mafioso")
    told = set()
    for call in record.calls:
        memory = call["request"]["messages"][0]["content"].split("#YOUR MEMORY:\n", 1)[1]
        if f"You investigated {mafioso} and discovered that they are the mafioso." in memory:
            told.add(roles[call["player"]])
    assert told == {"detective"}


def table_phrases() -> list[tuple[str, str]]:
    rows = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 4 and cells[0].isdigit():
            quoted = re.findall(r"`([^`]+)`", cells[3])
            assert quoted, f"row {cells[0]} of {DOC.name} quotes no phrase of ours: {cells[3]!r}"
            rows += [(cells[0], q) for q in quoted]
    return rows


def test_every_piece_of_reference_information_is_carried_where_the_table_says() -> None:
    rows = table_phrases()
    assert len({n for n, _ in rows}) >= 45
    ours = "\n".join(load_prompts("mini-mafia").templates.values())
    missing = [(n, p) for n, p in rows if p not in ours]
    assert missing == []


def test_our_prompt_says_nothing_the_table_does_not_map_to_the_reference() -> None:
    """Take every mapped phrase out of our templates: only headings, bullets and labels may be left."""
    rest = "\n".join(load_prompts("mini-mafia").templates.values())
    for _, phrase in sorted(table_phrases(), key=lambda r: -len(r[1])):
        rest = rest.replace(phrase, "")
    leftover = []
    for line in rest.splitlines():
        line = re.sub(r"^#?[A-Z ]+:?$", "", line.strip())  # section headings
        line = re.sub(r"^(?:-|\d\.)\s*(?:[A-Z][a-z]+:)?", "", line)  # bullets and their labels
        if re.search(r"[A-Za-z]", line):
            leftover.append(line)
    assert leftover == []


def test_length_is_comparable_with_the_reference() -> None:
    """The reference base prompt (src/prompt_long.txt) is 5,153 characters with its placeholders; ours must stay
    within a fifth of it (the condensed v4.1 was 40 %)."""
    base = len(load_prompts("mini-mafia").templates["base"])
    assert 0.8 * 5153 <= base <= 1.2 * 5153
    assert len(load_prompts("mini-mafia", "v4.1-condensed").templates["base"]) < 0.5 * 5153


def test_prompt_hash_covers_every_file_of_the_version() -> None:
    """Rule sentences that used to be Python strings now live in fragments.toml, and are hashed with the rest."""
    condensed = load_prompts("mini-mafia", "v4.1-condensed")
    assert "night_scripted" not in condensed.fragments and condensed.parser == "reference"
    new = load_prompts("mini-mafia")
    assert new.parser == "reference" and new.options["others_order"] == "shuffled"
    assert condensed.sha256 != new.sha256
    assert load_prompts("classic", "v2").fragments["role_mafioso"].startswith("You are in the mafia.")


# -- parsing as the reference parses ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('"I trust Bob."', ("I trust Bob.", False, None)),
        ('  "I trust Bob."\nBecause he spoke first.', ("I trust Bob.", False, None)),
        ('"I trust Bob, he', ("I trust Bob, he", True, None)),  # the token cap cut it: kept, marked "..."
        ('"I trust\nBob."', ("I trust", True, None)),  # only the first line is the message
        ('""', (None, False, "empty message in double quotes")),
        ('"" \nreasoning', (None, False, "empty message in double quotes")),
        ("I trust Bob.", (None, False, "answer does not start with a message in double quotes")),
        ("“I trust Bob.”", (None, False, "answer does not start with a message in double quotes")),
        ('**"I trust Bob."**', (None, False, "answer does not start with a message in double quotes")),
        ("", (None, False, "empty answer")),
        # A `<think>` block is text like any other, as in the reference (its first line holds no quoted message).
        ('<think>Bob is lying, I should say so.</think>\n"Bob is lying."',
         (None, False, "answer does not start with a message in double quotes")),
        ('<|channel|>analysis<|message|>hmm<|end|><|start|>assistant<|channel|>final<|message|>"Hi all."<|return|>',
         ("Hi all.", False, None)),
        ('analysis: think first. assistantfinal<|message|>"Hi all."', ("Hi all.", False, None)),
    ],
)
def test_discussion_answers_are_read_as_the_reference_reads_them(
    answer: str, expected: tuple[str | None, bool, str | None]
) -> None:
    assert parse_message_reference(answer) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Bob", ("Bob", False, None)),
        ("  bob \nHe was quiet.", ("Bob", False, None)),
        ("Bob.", ("Bob", True, None)),  # not exactly a name: the reference finds it in the answer
        ("I vote for Diana because Bob defended her", ("Bob", True, None)),  # first candidate *in list order*
        ("**Diana**", ("Diana", True, None)),
        ("Nobody", (None, False, "answer names none of: Bob, Diana")),
        ("", (None, False, "empty answer")),
        ("<think>Bob or Diana? Bob.</think>Diana", ("Bob", True, None)),  # no leniency for <think>, as there
        ("I think Bob is the mafioso", ("Bob", True, None)),
        ("I vote for Diana because she lied", ("Diana", True, None)),
        ("“Diana”", ("Diana", True, None)),  # curly quotes: found in the answer, as the reference finds it
        ("<|channel|>final<|message|>Diana<|return|>", ("Diana", False, None)),
    ],
)
def test_votes_are_read_as_the_reference_reads_them(answer: str, expected: tuple[str | None, bool, str | None]) -> None:
    assert parse_name_reference(answer, ["Bob", "Diana"]) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('<think>Bob is lying, I should say so.</think>\n"Bob is lying."', ("Bob is lying.", False, None)),
        ("<think>Bob is lying, I should", (None, False, "answer does not start with a message in double quotes")),
    ],
)
def test_strip_think_reads_other_tools_reasoning_answers(
    answer: str, expected: tuple[str | None, bool, str | None]
) -> None:
    assert parse_message_reference(answer, strip_think=True) == expected
    assert parse_name_reference("<think>Bob or Diana? Bob.</think>Diana", ["Bob", "Diana"], strip_think=True) == (
        "Diana", False, None)


def test_strip_reasoning_keeps_a_plain_answer() -> None:
    assert strip_reasoning('  "Hello"\n') == '"Hello"'


def test_an_unclosed_quote_is_shown_with_the_reference_marker_and_an_empty_one_is_a_flagged_silence() -> None:
    """Through the real agent and engine: the memory of the next speaker shows `Name: "text..."` and
    `Name: remained silent.`; the silence is flagged a format failure, the cut message is flagged truncated."""
    from mafiabench.backends.scripted_backend import ScriptedBackend
    from mafiabench.engine import make_game

    game = make_game("mini-mafia", {"discussion_rounds": 1}, 2)
    game.reset()
    answers = iter(['"I saw nothing, but', '""', '"Fine."'])
    agent = LLMAgent("scripted/x", ScriptedBackend(lambda m: next(answers)), load_prompts("mini-mafia"))
    from mafiabench.play.runner import _view

    truth = {p.name: p.role for p in game.players}
    prompts = []
    while not game.done:
        batch = game.pending()
        results = {}
        for d in batch:
            view = _view(game, d.player, truth, policy=False)
            if d.action == "speak":
                prompts.append(agent.build_prompt(d, view)[0])
                turn = asyncio.run(agent.act(d, view))
            else:
                turn = asyncio.run(LLMAgent("scripted/y", ScriptedBackend([d.choices[0]]),
                                            load_prompts("mini-mafia")).act(d, view))
            results[d.player] = turn.answer
        game.step(results)
    speak = [e for e in game.log if e.type in ("message", "silence")]
    first, second, _ = speak
    assert first.type == "message" and first.truncated and first.text == "I saw nothing, but"
    assert second.type == "silence" and second.format_failure
    assert f'{first.actor}: "I saw nothing, but..."' in prompts[2]
    assert f"{second.actor}: remained silent." in prompts[2]


def test_tolerant_parser_stays_with_the_first_version() -> None:
    d = Decision("Alice", "vote", "day", 1, ("Bob", "Diana"))
    answer, error, _ = LLMAgent.parse_with("tolerant", d, "Vote: Bob")
    assert answer.target == "Bob" and error is None
    answer, error, note = LLMAgent.parse_with("reference", d, "Vote: Bob")
    assert answer.target == "Bob" and note == {"name_found_later": True}

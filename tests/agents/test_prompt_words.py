"""Every word a model reads lives in its prompt version's folder, and `prompt_sha256` covers exactly that folder.

Two properties: (1) render every action of every shipped variant/version (and a batch_config's templates) once with
the version's files as shipped and once with every letter of those files' text swapped in case: a word of the prompt
that did not change comes from code, and fails unless it is game data (a player's name, a role, a player's own
message); (2) editing any sentence in a copy of a version's folder (a memory line, a fragment, a template) changes
what the model reads and the hash the record carries. The same for the detector's prompt and transcript lines.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import shutil
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, cast

import pytest

from mafiabench.agents.agent import PlayerView
from mafiabench.agents.llm import LLMAgent
from mafiabench.agents.prompts import (
    BATCH_CONFIG_WORDS,
    DEFAULT_PROMPT_VERSION,
    PromptSet,
    load_prompts,
    read_prompt_folder,
    render,
)
from mafiabench.backends.backend import Backend
from mafiabench.detect.cleansed_transcript import cleanse
from mafiabench.detect.detectors import DetectorPrompt, load_detector_prompt, load_detector_prompt_file, render_prompt
from mafiabench.engine import Answer, Decision, make_game

PROMPTS = Path(str(resources.files("mafiabench.agents") / "prompts"))
VERSIONS = sorted((d.parent.name, d.name) for d in PROMPTS.glob("*/*") if d.is_dir())


def test_every_variant_has_its_default_version_shipped() -> None:
    assert {v for v, _ in VERSIONS} == set(DEFAULT_PROMPT_VERSION)
    assert all((variant, version) in VERSIONS for variant, version in DEFAULT_PROMPT_VERSION.items())


@pytest.mark.parametrize(("variant", "version"), VERSIONS)
def test_a_copy_of_the_folder_hashes_as_the_shipped_version(tmp_path: Path, variant: str, version: str) -> None:
    shutil.copytree(PROMPTS / variant / version, tmp_path / version)
    copy = read_prompt_folder(tmp_path / version, variant, version)
    assert copy.sha256 == load_prompts(variant, version).sha256
    assert copy.provenance()["sha256"] == load_prompts(variant, version).provenance()["sha256"]


@pytest.mark.parametrize(("variant", "version"), VERSIONS)
def test_editing_any_file_of_the_folder_changes_the_hash(tmp_path: Path, variant: str, version: str) -> None:
    shipped = load_prompts(variant, version).sha256
    files = sorted(p.name for p in (PROMPTS / variant / version).iterdir() if p.suffix in (".txt", ".toml"))
    assert "memory.toml" in files
    for name in files:
        folder = tmp_path / name
        shutil.copytree(PROMPTS / variant / version, folder)
        path = folder / name
        text = path.read_text(encoding="utf-8")
        # a word of the last sentence reworded: "was" -> "is" if present, else one letter more at the end of a line
        edited = text.replace(" was ", " is ", 1) if " was " in text else text.replace("\n", "s\n", 1)
        assert edited != text
        path.write_text(edited, encoding="utf-8")
        assert read_prompt_folder(folder, variant, version).sha256 != shipped, name


# -- every word of every rendered prompt is the folder's or game data --------------------------------------------------

PLACEHOLDER = re.compile(r"\$(?:\w+|\{\w+\})")  # ours: string.Template
FORMAT_FIELD = re.compile(r"\{\w+\}")  # a batch_config's: str.format
DATA_WORDS = {"zorblat", "quux", "wibble", "ERR"}  # what the players say and reason, and a parse error below
ROLES = {"mafioso", "detective", "villager", "bystander", "doctor"}


def swapped(text: str, keep: re.Pattern[str] = PLACEHOLDER) -> str:
    """Every letter of `text` in the other case, placeholders left as they are."""
    out, at = [], 0
    for m in keep.finditer(text):
        out += [text[at : m.start()].swapcase(), m.group(0)]
        at = m.end()
    return "".join(out) + text[at:].swapcase()


def swapped_folder(variant: str, version: str, dest: Path) -> Path:
    """A copy of a version's folder with every word swapped in case: templates, fragments and memory lines (not
    `version.toml`, which holds options, no words)."""
    shutil.copytree(PROMPTS / variant / version, dest)
    for path in dest.iterdir():
        if path.suffix == ".txt":
            path.write_text(swapped(path.read_text(encoding="utf-8")), encoding="utf-8")
        elif path.name in ("fragments.toml", "memory.toml"):
            table = tomllib.loads(path.read_text(encoding="utf-8"))
            path.write_text("".join(f"{k} = {json.dumps(swapped(v))}\n" for k, v in table.items()), encoding="utf-8")
    return dest


def answer(decision: Decision, rng: random.Random) -> Answer:
    """Random answers that reach every kind of memory line: long and short messages, silences, reasoning, failed
    formats (flagged silences and random votes)."""
    if rng.random() < 0.2:
        return Answer(format_failure=True)
    if decision.action == "speak":
        return Answer(text=" ".join(rng.choice(["zorblat", "quux", "wibble"]) for _ in range(rng.choice([2, 90]))))
    if decision.mode == "belief":
        return Answer(belief={c: rng.random() for c in decision.choices}, reasoning="quux wibble")
    return Answer(target=rng.choice(decision.choices))


def unread_words(shown: str, changed: str, names: tuple[str, ...]) -> set[str]:
    """Words of `shown` that did not change when the folder's words did and are not game data."""
    assert len(shown) == len(changed), "the prompt's shape depends on its words"
    data = ROLES | {w for n in names for w in re.findall(r"[A-Za-z]+", n)}
    cut = {w[:i] for w in DATA_WORDS for i in range(1, len(w) + 1)}  # a message cut at the limit
    bad = set()
    for m in re.finditer(r"[A-Za-z]+", shown):
        same = [a == b for a, b in zip(m.group(0), changed[m.start() : m.end()], strict=True)]
        if any(same) and not (all(same) and m.group(0) in data | cut):
            bad.add(m.group(0))
    return bad


def code_words(variant: str, rules: dict[str, Any], shown: PromptSet, changed: PromptSet) -> tuple[set[str], int]:
    """Play seeded games with random answers; render every decision's prompt (and its re-prompt) with both prompt
    sets: (words from code, prompts rendered)."""
    bad: set[str] = set()
    n = 0
    for seed in range(4):
        rng = random.Random(seed)
        game = make_game(variant, rules, seed)
        game.reset()
        while not game.done:
            pending = game.pending()
            for d in pending:
                p = game.player(d.player)
                view = PlayerView(d.player, p.role, p.team, variant, game.rules,
                                  tuple(q.name for q in game.players), tuple(game.view(d.player)))
                prompts = []
                for ps in (shown, changed):
                    prompt = LLMAgent("m", cast(Backend, None), ps, game_id=f"g{seed}").build_prompt(d, view)[0]
                    prompts.append(render(ps.fragments["reprompt"], prompt=prompt, error="ERR"))
                bad |= unread_words(prompts[0], prompts[1], view.players)
                n += 1
            game.step({d.player: answer(d, rng) for d in pending})
    return bad, n


RULES: dict[str, list[dict[str, Any]]] = {
    "mini-mafia": [{}, {"night": "agents", "mafioso_knows_detective": True, "message_limit": 40},
                   {"discussion_rounds": 0}],
    "classic": [{"detective": True, "message_limit": 60},
                {"detective": True, "decision": "name", "reveal_role": False, "memory": "full"},
                {"n_players": 7, "memory": "current_phase", "speaking_rounds": 2, "night_decider": "mafia_vote"}],
    "async": [{"n_players": 6, "n_mafia": 2, "day_seconds": 20, "night_seconds": 10, "max_days": 3,
               "message_limit": 60},
              {"n_players": 5, "n_mafia": 1, "day_seconds": 60, "night_seconds": 90, "tick_seconds": 30,
               "max_days": 2},
              {"n_players": 4, "n_mafia": 1, "day_seconds": 150, "night_seconds": 120, "tick_seconds": 50,
               "max_days": 2}],
}


@pytest.mark.parametrize(("variant", "version"), VERSIONS)
def test_every_word_of_every_prompt_comes_from_the_version_folder(tmp_path: Path, variant: str, version: str) -> None:
    shown = load_prompts(variant, version)
    changed = read_prompt_folder(swapped_folder(variant, version, tmp_path / version), variant, version)
    for rules in RULES[variant]:
        bad, n = code_words(variant, rules, shown, changed)
        assert n > 10
        assert not bad, f"{variant}/{version} {rules}: words written by code, not by the folder: {sorted(bad)}"


def test_a_batch_config_is_played_with_its_own_words_and_its_lender_folder(tmp_path: Path) -> None:
    config = next((Path(__file__).parents[1] / "fixtures" / "datasets" / "mini_mafia").glob("*/batch_config.json"))
    raw = json.loads(config.read_text(encoding="utf-8"))
    templates = raw["prompt_config"]["templates"]
    raw["prompt_config"]["templates"] = {k: swapped(v, FORMAT_FIELD) for k, v in templates.items()}
    (tmp_path / "batch_config.json").write_text(json.dumps(raw), encoding="utf-8")
    lender = read_prompt_folder(swapped_folder(*BATCH_CONFIG_WORDS, tmp_path / "lender"), *BATCH_CONFIG_WORDS)
    changed = dataclasses.replace(PromptSet.from_batch_config(tmp_path / "batch_config.json"),
                                  fragments=lender.fragments, memory=lender.memory)
    bad, n = code_words("mini-mafia", {}, PromptSet.from_batch_config(config), changed)
    assert n > 10 and not bad, sorted(bad)


def test_the_check_catches_a_word_written_by_code() -> None:
    """The property above is not vacuous: a word put in by code (here the re-prompt's, as it was before) is found."""
    assert unread_words("Alice: answer again", "Alice: ANSWER again", ("Alice",)) == {"again"}
    assert unread_words("You killed Bob", "yOU KILLED Bob", ("Bob",)) == set()
    assert unread_words("2 mafiosos", "2 mafiosoS", ()) == {"mafiosos"}


def test_editing_a_memory_line_changes_what_the_model_reads_and_the_hash(tmp_path: Path) -> None:
    """The hash a record carries moves with a memory line the model reads (the death announcement, reworded)."""
    variant, version = "mini-mafia", DEFAULT_PROMPT_VERSION["mini-mafia"]
    folder = tmp_path / version
    shutil.copytree(PROMPTS / variant / version, folder)
    memory = folder / "memory.toml"
    memory.write_text(memory.read_text(encoding="utf-8").replace("was found dead.", "was found at dawn."),
                      encoding="utf-8")
    edited = read_prompt_folder(folder, variant, version)
    shipped = load_prompts(variant, version)
    game = make_game(variant, {}, 1)
    game.reset()
    decision = game.pending()[0]
    p = game.player(decision.player)
    view = PlayerView(p.name, p.role, p.team, variant, game.rules, tuple(q.name for q in game.players),
                      tuple(game.view(p.name)))
    reads = [LLMAgent("m", cast(Backend, None), ps).build_prompt(decision, view)[0] for ps in (shipped, edited)]
    assert "was found dead." in reads[0] and "was found at dawn." in reads[1]
    assert edited.provenance()["sha256"] != shipped.provenance()["sha256"]


# -- the detector reads its prompt version's words too ----------------------------------------------------------------

DETECT = Path(str(resources.files("mafiabench.detect") / "prompts"))


def detector_folder(dest: Path, swap: bool) -> DetectorPrompt:
    shutil.copytree(DETECT / "v1", dest)
    if swap:
        (dest / "prompt.txt").write_text(swapped((dest / "prompt.txt").read_text(encoding="utf-8")), encoding="utf-8")
        table = tomllib.loads((dest / "transcript.toml").read_text(encoding="utf-8"))
        (dest / "transcript.toml").write_text("".join(f"{k} = {json.dumps(swapped(v))}\n" for k, v in table.items()),
                                              encoding="utf-8")
    return load_detector_prompt_file(dest / "prompt.txt", transcript=dest / "transcript.toml")


def test_every_word_the_detector_reads_comes_from_its_prompt_folder(tmp_path: Path) -> None:
    shown, changed = detector_folder(tmp_path / "a", False), detector_folder(tmp_path / "b", True)
    assert shown.sha256 == load_detector_prompt("v1").sha256  # the copy is the shipped version
    checked = 0
    for seed in range(3):
        rng = random.Random(seed)
        game = make_game("async", RULES["async"][0], seed)
        game.reset()
        while not game.done:
            game.step({d.player: answer(d, rng) for d in game.pending()})
        names = tuple(p.name for p in game.players)
        for cut in range(0, 4):  # cut 0: no day yet, the empty-transcript words
            texts = [render_prompt(p, cleanse("g", game.log, names, 2, cut, p.words)) for p in (shown, changed)]
            assert not unread_words(texts[0], texts[1], names)
            checked += len(texts[0])
    assert checked > 2000


def test_editing_a_transcript_line_changes_the_detector_prompt_hash(tmp_path: Path) -> None:
    shutil.copytree(DETECT / "v1", tmp_path / "v1")
    words = tmp_path / "v1" / "transcript.toml"
    words.write_text(words.read_text(encoding="utf-8").replace("was voted out.", "was lynched."), encoding="utf-8")
    edited = load_detector_prompt_file(tmp_path / "v1" / "prompt.txt", transcript=words)
    assert edited.sha256 != load_detector_prompt("v1").sha256
    assert edited.words["elimination"].endswith("was lynched.")
    own = load_detector_prompt_file(tmp_path / "v1" / "prompt.txt")  # a user's own file: the shipped lines
    assert own.sha256 == load_detector_prompt("v1").sha256

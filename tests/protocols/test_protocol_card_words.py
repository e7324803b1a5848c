"""The protocol card checks the words the models read, not the version's name (issue 35, item 2): one sentence added
to a shipped prompt version's files is a new deviation on the card of every shipped experiment that plays it, a
published item whose words are gone is one, and a changed cap is one. Every shipped experiment's card is regenerated
here and compared with its golden text (tests/golden/cards/; UPDATE_GOLDEN=1 rewrites them), so a change to a card
is seen in review."""

from __future__ import annotations

import os
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

import mafiabench.study.protocol as study_protocol
from mafiabench.agents.prompts import read_prompt_folder
from mafiabench.protocols import render_text
from mafiabench.study.protocol import protocol_card
from mafiabench.study.spec import load_experiment, parse_experiment

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ROOT / "src" / "mafiabench" / "agents" / "prompts"
GOLDEN = Path(__file__).parents[1] / "golden" / "cards"
SHIPPED = sorted(p for p in (ROOT / "experiments").glob("*.toml")
                 if "reference" in tomllib.loads(p.read_text(encoding="utf-8")))
# (experiment, the version folder it plays, a template of it)
PLAYED = [("mini_mafia_backgrounds.toml", "mini-mafia/v4.1-full", "vote.txt"),
          ("strategema.toml", "classic/v4", "vote.txt"),
          ("hidden_in_plain_text.toml", "async/v2", "vote.txt")]
SENTENCE = "Remember that the quietest player is often the guilty one."


def with_folder(monkeypatch: pytest.MonkeyPatch, folder: Path, variant: str, version: str) -> None:
    """Make the experiment's prompt version read from `folder` (a changed copy of the shipped one)."""
    changed = read_prompt_folder(folder, variant, version)
    monkeypatch.setattr(study_protocol, "resolve_prompts", lambda *_args, **_kw: changed)


def keys(experiment: str) -> set[str]:
    c = protocol_card(load_experiment(ROOT / "experiments" / experiment))
    assert c is not None
    return {r.key for r in c.deviations}


@pytest.mark.parametrize(("experiment", "ident", "template"), PLAYED)
def test_one_added_sentence_is_a_new_deviation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, experiment: str,
                                               ident: str, template: str) -> None:
    before = keys(experiment)
    variant, version = ident.split("/")
    folder = tmp_path / version
    shutil.copytree(PROMPTS / variant / version, folder)
    path = folder / template
    path.write_text(path.read_text(encoding="utf-8").rstrip("\n") + "\n" + SENTENCE + "\n", encoding="utf-8")
    with_folder(monkeypatch, folder, variant, version)
    c = protocol_card(load_experiment(ROOT / "experiments" / experiment))
    assert c is not None
    new = [r for r in c.deviations if r.key not in before]
    assert [(r.key, r.experiment_value) for r in new] == [("added.unlisted.1", SENTENCE)]
    assert SENTENCE in render_text(c)


@pytest.mark.parametrize(("experiment", "ident", "template"), PLAYED)
def test_a_published_item_whose_words_are_gone_is_a_deviation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              experiment: str, ident: str, template: str) -> None:
    before = keys(experiment)
    c = protocol_card(load_experiment(ROOT / "experiments" / experiment))
    assert c is not None
    row = next(r for r in c.rows if r.key.startswith("information.") and r.matches
               and any(p in (PROMPTS / ident / template).read_text(encoding="utf-8") for p in r.experiment_value))
    phrase = next(p for p in row.experiment_value if p in (PROMPTS / ident / template).read_text(encoding="utf-8"))
    variant, version = ident.split("/")
    folder = tmp_path / version
    shutil.copytree(PROMPTS / variant / version, folder)
    for path in folder.glob("*.txt"):  # the words are gone from every template that has them
        path.write_text(path.read_text(encoding="utf-8").replace(phrase, ""), encoding="utf-8")
    with_folder(monkeypatch, folder, variant, version)
    after = protocol_card(load_experiment(ROOT / "experiments" / experiment))
    assert after is not None
    assert {r.key for r in after.deviations} - before == {row.key}


def edited(experiment: str, edit: Any) -> Any:
    path = ROOT / "experiments" / experiment
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    edit(data)
    if isinstance(data.get("detector", {}).get("imported_games"), str):
        data["detector"]["imported_games"] = str(path.parent / data["detector"]["imported_games"])
    return protocol_card(parse_experiment(data, f"{path} (edited)"))


@pytest.mark.parametrize(("experiment", "section", "key", "value", "deviation"), [
    ("mini_mafia_backgrounds.toml", "rules", "message_limit", 250, "rules.message_limit"),
    ("strategema.toml", "rules", "message_limit", 300, "caps.statement_chars"),
    ("hidden_in_plain_text.toml", "rules", "max_typing_seconds", 20, "timing.typing"),
])
def test_a_changed_cap_is_shown(experiment: str, section: str, key: str, value: Any, deviation: str) -> None:
    c = edited(experiment, lambda d: d.setdefault(section, {}).__setitem__(key, value))
    row = next(r for r in c.deviations if r.key == deviation)
    assert str(value) in str(row.experiment_value)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_card_is_regenerated(path: Path) -> None:
    c = protocol_card(load_experiment(path))
    assert c is not None
    text = render_text(c) + "\n"
    golden = GOLDEN / f"{path.stem}.txt"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert golden.read_text(encoding="utf-8") == text

"""Playing with the reference's own templates, loaded from the user's copy of a published batch_config.json.

The file written here has the shape of `mini-mafia/data/batch/batch_20250815_111046_v4.0/batch_config.json` in
`bastoscostadavi/llm-mafia-game` (batch_id, timestamp, prompt_config {version, message_limit, templates {base_prompt,
discussion_suffix, voting_suffix, night_action_suffix}}, model_configs, game_type), with the placeholders its code fills
(`{composition}`, `{name}`, `{other_players}`, `{memory}`, `{action_specific_content}`; `{round_num}`,
`{discussion_rounds}`, `{candidates}`, `{action}`) and its `[INST]` markers. The template *text* is ours, written for
the test: mafiabench never ships the reference prompt.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from mafiabench.cli import main
from mafiabench.errors import UserError
from mafiabench.study.design import expand
from mafiabench.study.spec import load_experiment
from support.prompts import TEMPLATES


def write_batch_config(folder: Path, templates: dict[str, str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "batch_config.json"
    path.write_text(json.dumps({
        "batch_id": folder.name,
        "timestamp": "2025-08-15T11:10:46.884610",
        "prompt_config": {"version": "v4.0", "message_limit": 200, "templates": templates or TEMPLATES},
        "model_configs": {r: {"type": "openai", "model": "gpt-4.1-mini", "temperature": 0.7}
                          for r in ("detective", "mafioso", "villager")},
        "game_type": "mini_mafia",
    }, indent=2), encoding="utf-8")
    return path


def canonical_sha(templates: dict[str, str]) -> str:
    blob = json.dumps(templates, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def test_a_game_plays_with_the_templates_of_a_batch_config_and_records_their_hash(tmp_path: Path) -> None:
    write_batch_config(tmp_path / "batches" / "batch_20250815_111046_v4.0")
    game = tmp_path / "game.toml"
    game.write_text('variant = "mini-mafia"\nseed = 4\n'
                    'prompt = { from_batch_config = "batches/batch_20250815_111046_v4.0/batch_config.json" }\n'
                    '[agents]\ndefault = "scripted/naive"\n', encoding="utf-8")
    out = tmp_path / "record.json"
    assert main(["play", "--config", str(game), "--out", str(out), "--quiet"]) == 0
    record = json.loads(out.read_text())
    # the templates' own hash, and the record's prompt hash over them and the code that fills them in
    assert record["prompt"]["templates_sha256"] == canonical_sha(TEMPLATES) != record["prompt"]["sha256"]
    assert {k: record["prompt"][k] for k in ("version", "source")} == {
        "version": "mini-mafia/batch-config-v4.0", "source": "batch_config.json"}
    prompts = [c["request"]["messages"][0]["content"] for c in record["calls"]]
    assert len(prompts) == 2 * 3 + 3
    names = {p["name"]: p["role"] for p in record["players"]}
    for call, prompt in zip(record["calls"], prompts, strict=True):
        me = call["player"]
        assert prompt.startswith("[INST]\n#CONTEXT:\nA test game of Mafia.") and "TEST-RULES-PARAGRAPH" in prompt
        assert "there are: 1 mafioso, 1 detective, 2 villagers." in prompt
        others = prompt.split("the other players are: ", 1)[1].split(".\n", 1)[0].split(", ")
        assert sorted(others) == sorted(n for n in names if n != me)
        memory = prompt.split("#YOUR MEMORY:\n", 1)[1]
        assert memory.startswith(f"You're {me}, the {names[me]}.\nNight 1 begins.\n")
        if call["action"] == "speak":
            assert "#DISCUSSION ROUND" in memory and prompt.endswith("optional reasoning:[/INST]\n")
        else:
            assert "#VOTING TIME: \nVote to arrest one player from: " in memory
        # the engine's information flow is unchanged: only the detective reads who the mafioso is
        told = "discovered that they are the mafioso" in memory
        assert told == (names[me] == "detective")
    # the static part is what a provider's prefix cache may reuse
    assert all(c["prefix_reuse_chars"] > 0 for c in record["calls"][1:] if c["player"] == record["calls"][0]["player"])


def test_the_hash_is_the_one_the_batch_importer_records_for_the_same_file() -> None:
    """A simulated game and an imported game that used the same templates carry the same prompt hash: for every
    batch fixture (real-shape batch_config.json files), the loader's hash equals the importer's."""
    from mafiabench.agents.prompts import PromptSet
    from mafiabench.importers.mini_mafia_batch import read_mini_mafia
    from mafiabench.record import GameRecord

    fixtures = Path(__file__).parents[1] / "fixtures" / "datasets" / "mini_mafia"
    checked = 0
    for config in sorted(fixtures.glob("*/batch_config.json")):
        templates = json.loads(config.read_text())["prompt_config"]["templates"]
        imported = [g for g in read_mini_mafia(config.parent) if isinstance(g, GameRecord) and g.prompt]
        if not imported or set(templates) != set(TEMPLATES):
            continue
        loaded = PromptSet.from_batch_config(config)
        assert loaded.templates_sha256 == canonical_sha(templates)
        assert {g.prompt["templates_sha256"] for g in imported} == {loaded.templates_sha256}  # type: ignore[index]
        checked += 1
    assert checked >= 1


def test_an_experiment_plays_every_game_with_the_batch_config(tmp_path: Path) -> None:
    write_batch_config(tmp_path / "b")
    exp = tmp_path / "exp.toml"
    exp.write_text('name = "ref"\nprompt = { from_batch_config = "b/batch_config.json" }\ngames_per_cell = 2\n'
                   '[[cells]]\nname = "c"\nagents = { default = "scripted/naive" }\n', encoding="utf-8")
    experiment = load_experiment(exp)
    assert experiment.prompt_label() == "mini-mafia/batch-config-v4.0"
    specs = [g.spec(experiment) for g in expand(experiment)]
    assert [s.prompt_file for s in specs] == [str(tmp_path / "b" / "batch_config.json")] * 2


@pytest.mark.parametrize(
    ("templates", "message"),
    [
        ({k: v for k, v in TEMPLATES.items() if k != "voting_suffix"},
         "field 'prompt_config.templates.voting_suffix' is missing or empty"),
        ({**TEMPLATES, "base_prompt": "no memory here {action_specific_content}"},
         "has no {memory} placeholder"),
    ],
)
def test_a_bad_batch_config_is_refused_naming_file_and_field(
    tmp_path: Path, templates: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_batch_config(tmp_path / "bad", templates)
    game = tmp_path / "game.toml"
    game.write_text(f'prompt = {{ from_batch_config = "{path}" }}\n[agents]\ndefault = "policy/random"\n')
    assert main(["play", "--config", str(game), "--quiet"]) != 0
    err = capsys.readouterr().err
    assert str(path) in err and message in err and "prompt" in err
    with pytest.raises(UserError, match=r"prompt_config\.templates"):
        from mafiabench.agents.prompts import PromptSet

        PromptSet.from_batch_config(path)


def test_version_and_batch_config_are_exclusive(tmp_path: Path) -> None:
    path = write_batch_config(tmp_path / "b")
    game = tmp_path / "game.toml"
    game.write_text(f'prompt = {{ version = "v4.1", from_batch_config = "{path}" }}\n'
                    '[agents]\ndefault = "policy/random"\n')
    assert main(["play", "--config", str(game), "--quiet"]) != 0

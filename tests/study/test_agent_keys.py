"""An agents table names roles and players the games have (issue 31 item 6): a misspelt role inside a cell
(`mafiso = ...`) was read as a player name no game has and failed only when a game was played ("no agent for player
'Charlie' (role mafioso)"), naming no file, cell or key; a `policy/always-accuse:Nobody` in a game file named the
player but not the file. Both are now refused where the file is read, naming file, cell and key, with a suggestion."""

from __future__ import annotations

from pathlib import Path

import pytest

from mafiabench.errors import UserError
from mafiabench.play.config import load_game_config
from mafiabench.study.spec import load_experiment

ROOT = Path(__file__).resolve().parents[2]


def experiment(tmp_path: Path, agents: str, head: str = "") -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(f'name = "x"\n{head}[[cells]]\nname = "ok"\nagents = {{ default = "policy/random" }}\n'
                    f'[[cells]]\nname = "typo-cell"\nagents = {{ {agents} }}\n')
    return path


@pytest.mark.parametrize(("agents", "head", "expected"), [
    ('mafiso = "policy/random", default = "policy/random"', "",
     ["cells[1] (cell 'typo-cell')", "agents.mafiso", "did you mean 'mafioso'?"]),
    ('Charly = "policy/random", default = "policy/random"', "",
     ["cells[1] (cell 'typo-cell')", "agents.Charly", "Alice, Bob, Charlie, Diana", "did you mean 'Charlie'?"]),
    ('defualt = "policy/random"', "", ["agents.defualt", "did you mean 'default'?"]),
    ('default = "policy/always-accuse:Nobody"', "", ["agents.default", "'Nobody' is not a player"]),
    ('mafiosso = "policy/random", default = "policy/random"', 'variant = "classic"\n',
     ["agents.mafiosso", "a role of classic", "Player 1, Player 2", "did you mean 'mafioso'?"]),
])
def test_an_unknown_key_in_a_cell_names_file_cell_and_key(tmp_path: Path, agents: str, head: str,
                                                          expected: list[str]) -> None:
    path = experiment(tmp_path, agents, head)
    with pytest.raises(UserError) as info:
        load_experiment(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    for fragment in expected:
        assert fragment in message, message


@pytest.mark.parametrize(("cell", "expected"), [
    ('agents = { default = "policy/random", mafioso = "fakex/alpha" }',
     "agents.mafioso: agent 'fakex/alpha': unknown provider 'fakex'"),
    ('agents = { default = "policy/random" }\nrules = { discussion_rounds = "two" }',
     "rules.discussion_rounds = 'two': Input should be a valid integer"),
])
def test_a_bad_provider_or_rule_in_a_cell_names_file_cell_and_key_and_no_other_cell(
    tmp_path: Path, cell: str, expected: str
) -> None:
    """Deliver 6 of issue 31, errors inside cells name file, cell and key: an unknown provider named neither the cell
    nor the key, and both errors printed the whole list of cells (`field 'cells' = [{...}, {...}]`)."""
    path = tmp_path / "exp.toml"
    path.write_text('name = "x"\n[[cells]]\nname = "other"\nagents = { default = "policy/informed" }\n'
                    f'[[cells]]\nname = "bad-cell"\n{cell}\n')
    with pytest.raises(UserError) as info:
        load_experiment(path)
    assert str(info.value).startswith(f"{path}: cells[1] (cell 'bad-cell'): {expected}"), str(info.value)
    assert "policy/informed" not in str(info.value)  # the other cell is not printed


@pytest.mark.parametrize(("agents", "head"), [
    ('mafioso = "policy/random", villager = "policy/random", detective = "policy/random"', ""),
    ('bystander = "policy/random", Diana = "policy/informed", default = "policy/random"', ""),  # villager's alias
    ('Ann = "policy/always-accuse:Dov", default = "policy/random"', '[rules]\nnames = ["Ann", "Bea", "Cal", "Dov"]\n'),
    ('Wren = "policy/random", default = "policy/random"', 'variant = "async"\n[rules]\ndraw_names = true\n'),
    ('"Player 3" = "policy/random", default = "policy/random"', 'variant = "classic"\n'),
    ('detective = "policy/random", default = "policy/random"', 'variant = "classic"\n'),  # a role, unused here
])
def test_roles_players_and_aliases_are_accepted(tmp_path: Path, agents: str, head: str) -> None:
    load_experiment(experiment(tmp_path, agents, head))


def test_a_game_file_accusing_no_player_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "game.toml"
    path.write_text('[agents]\ndefault = "policy/always-accuse:Nobody"\n')
    with pytest.raises(UserError) as info:
        load_game_config(path)
    assert str(info.value).startswith(f"{path}: agents.default = 'policy/always-accuse:Nobody': 'Nobody' is not a "
                                      "player of these games (players: Alice, Bob, Charlie, Diana)")


def test_every_shipped_experiment_still_loads() -> None:
    shipped = sorted((ROOT / "experiments").glob("*.toml"))
    assert len(shipped) >= 3
    for path in shipped:
        load_experiment(path)

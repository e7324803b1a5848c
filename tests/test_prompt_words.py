"""Every word a model reads lives in its prompt version's folder, and `prompt_sha256` covers exactly that folder.

Two properties: (1) render every action of every shipped variant/version (and a batch_config's templates) once with
the version's files as shipped and once with every letter of those files' text swapped in case: a word of the prompt
that did not change comes from code, and fails unless it is game data (a player's name, a role, a player's own
message); (2) editing any sentence in a copy of a version's folder (a memory line, a fragment, a template) changes
what the model reads and the hash the record carries.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

import pytest

from mafiabench.agents.prompts import DEFAULT_PROMPT_VERSION, load_prompts, read_prompt_folder

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

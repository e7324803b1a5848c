"""`[statements]` in an experiment file (issue 39): parsed with clear errors, off by default, part of what a cell's
games are (its fingerprint) only when on, and priced by preview with the listeners' multiplying share shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from mafiabench.cli import main
from mafiabench.errors import UserError
from mafiabench.study.design import cell_fingerprint, expand_cells
from mafiabench.study.estimate import estimate_plan
from mafiabench.study.spec import load_experiment

EXPERIMENT = """
name = "labels"
variant = "{variant}"
games_per_cell = 2
warehouse = "{warehouse}"
{extra}

[[cells]]
name = "c"
agents = {{ default = "openai/gpt-4.1-mini" }}
"""


def write(tmp_path: Path, section: str = "", variant: str = "mini-mafia", extra: str = "") -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(EXPERIMENT.format(variant=variant, warehouse=tmp_path / "w.duckdb", extra=extra) + section)
    return path


def test_off_by_default_and_on_with_an_empty_section(tmp_path: Path) -> None:
    assert load_experiment(write(tmp_path)).statements is None
    on = load_experiment(write(tmp_path, "\n[statements]\n")).statements
    assert on is not None and (on.speaker, on.listeners, on.memory, on.max_tokens) == (True, True, False, 300)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("[statements]\nspeaker = false\nlisteners = false\n",
         "exp.toml: field 'statements' = {'speaker': False, 'listeners': False}: Value error, [statements] asks "
         "nobody: set speaker = true, listeners = true or both"),
        ("[statements]\npeers = true\n", "exp.toml: unknown field 'statements.peers' (value True)"),
        ("[statements]\nmax_tokens = 0\n", "exp.toml: field 'statements.max_tokens' = 0: Input should be greater than "
                                           "or equal to 1"),
        ("[statements]\nmemory = \"yes\"\n", "exp.toml: field 'statements.memory' = 'yes': Input should be a valid "
                                             "boolean"),
    ],
)
def test_a_bad_section_names_file_field_and_value(tmp_path: Path, section: str, message: str) -> None:
    with pytest.raises(UserError) as info:
        load_experiment(write(tmp_path, "\n" + section))
    assert str(info.value).replace(str(tmp_path / "exp.toml"), "exp.toml") == message


def test_a_prompt_version_without_label_words_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mafiabench.agents.statements as statements

    def missing(variant: str, version: str) -> None:
        raise UserError(f"prompt version {variant}/{version} has no statements/ folder")

    monkeypatch.setattr(statements, "_load", missing)
    with pytest.raises(UserError, match=r"statements: prompt version mini-mafia/v4.1-full has no statements/ folder"):
        load_experiment(write(tmp_path, "\n[statements]\n"))


def test_the_fingerprint_holds_the_layer_only_when_on(tmp_path: Path) -> None:
    plain = load_experiment(write(tmp_path))
    fp = cell_fingerprint(plain, expand_cells(plain)[0])
    assert "statements" not in fp  # cells without labels keep their landed fingerprints
    on = load_experiment(write(tmp_path, "\n[statements]\nlisteners = false\n"))
    fp_on = cell_fingerprint(on, expand_cells(on)[0])
    assert {k: v for k, v in fp_on.items() if k != "statements"} == fp
    assert fp_on["statements"]["version"] == "mini-mafia/v4.1-full/statements"
    assert (fp_on["statements"]["speaker"], fp_on["statements"]["listeners"]) == (True, False)


@pytest.mark.parametrize("variant", ["mini-mafia", "classic"])
def test_preview_prices_the_label_calls_and_shows_their_share(
    tmp_path: Path, variant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = estimate_plan(load_experiment(write(tmp_path, variant=variant)), samples=2)
    path = write(tmp_path, "\n[statements]\n", variant=variant)
    est = estimate_plan(load_experiment(path), samples=2)
    labels = est.labels()
    assert set(labels) == {"speaker", "listeners"}
    # the label calls are counted in the totals, on top of the game's own (which they do not change)
    assert est.total().calls == plain.total().calls + sum(u.calls for u in labels.values())
    assert est.total().cost_usd == pytest.approx(plain.total().cost_usd + sum(u.cost_usd for u in labels.values()))
    # a message gets one speaker's label and one per living listener: more listeners' calls than speakers'
    assert labels["listeners"].calls > labels["speaker"].calls > 0
    assert main(["preview", str(path)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("Statement labels ([statements]"))
    share = sum(u.cost_usd for u in labels.values()) / est.total().cost_usd
    assert f"{share:.0%} of the cost (included above)" in line and "never in any memory" in line
    assert "labels by the listeners" in out and "labels by the speaker" in out

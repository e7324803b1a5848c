"""`mafiabench detect`, the `[detector]` and `[[imports]]` sections of an experiment file, and the detector flow.

The detection logic is tested in test_detect.py; this checks validation (errors name file, field and value), the
command's two paths (plain and Prefect) and that `mafiabench run` detects after landing, landing each key once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import duckdb
import pytest

from mafiabench.cli import main as cli
from mafiabench.errors import UserError
from mafiabench.study.spec import load_experiment

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "datasets"
HEAD = 'name = "x"\nvariant = "async"\n[[cells]]\nname = "c"\nagents = {default = "scripted/naive"}\n'


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "exp.toml"
    p.write_text(HEAD + text)
    return p


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[detector]\nmodels = ["policy/oracle"]', ["detector.models", "policy/oracle", "policy/most-voted"]),
        ('[detector]\nmodels = ["nowhere/m"]', ["detector", "nowhere", "unknown provider"]),
        ('[detector]\nmodels = ["no-slash"]', ["detector.models", "no-slash"]),
        ('[detector]\nmodels = []', ["detector.models"]),
        ('[detector]\nmodels = ["policy/random", "policy/random"]', ["repeated", "policy/random"]),
        ('[detector]\nmodels = ["policy/random"]\ntemperature = 7', ["detector.temperature", "7"]),
        ('[detector]\nmodels = ["policy/random"]\nprompt_version = "v9"', ["detector.prompt_version", "v9"]),
        ('[detector]\nmodels = ["policy/random"]\nprompt_file = "nope.txt"', ["detector.prompt_file", "nope.txt"]),
        ('[detector]\nmodels = ["policy/random"]\nsimulated = false', ["detector", "no games"]),
        ('[detector]\nmodels = ["policy/random"]\nimported = ["simulation"]', ["detector.imported", "simulation"]),
        ('[detector]\nmodels = ["policy/random"]\ncolour = "red"', ["detector.colour", "red"]),
        ('[[imports]]\nformat = "csv"\npath = "."', ["imports", "csv"]),
        ('[[imports]]\nformat = "dallinger"\npath = "missing-folder"', ["imports", "missing-folder"]),
    ],
)
def test_detector_section_errors_name_file_field_and_value(tmp_path: Path, text: str, expected: list[str]) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UserError) as info:
        load_experiment(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in expected:
        assert fragment in message, message


def test_a_prompt_file_with_an_unknown_placeholder_is_named(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("Players: $players. Read $transcript and name $k of them, $nonsense.")
    path = write(tmp_path, '[detector]\nmodels = ["fake/d"]\nprompt_file = "mine.txt"')
    with pytest.raises(UserError, match=r"mine\.txt.*\$nonsense"):
        load_experiment(path)
    (tmp_path / "mine.txt").write_text("Players: $players ($k mafia, days 1-$cut):\n$transcript\nCost: $$5")
    exp = load_experiment(path)
    spec = exp.detector_spec()
    assert spec.prompt_file == str(tmp_path / "mine.txt")  # relative to the experiment file
    assert spec.sources == ("simulation",) and spec.experiments == ("x",)


def test_shipped_detector_experiments_validate() -> None:
    real = load_experiment(ROOT / "experiments" / "hidden_in_plain_text.toml")
    assert real.variant == "async" and real.planned_games() == 35
    assert real.rules["n_players"] == 10 and real.rules["n_mafia"] == 2
    assert real.rules["day_seconds"] == 150 and real.rules["night_seconds"] == 60
    # As the paper ran it: GPT-4o in every seat at the default temperature, the v2 prompts (no nudge to send or
    # wait, no length asked) with room for ~110-word messages, votes posted as cast, names drawn per game.
    assert real.agent_specs() == ["openai/gpt-4o"]
    assert real.prompt_version == "v2"
    assert real.rules["votes_as_cast"] and real.rules["draw_names"] and real.rules["message_limit"] >= 2000
    settings = real.models["default"]
    assert settings.temperature is None and (settings.max_tokens_message or 0) >= 300
    spec = real.detector_spec()
    assert spec.sources == ("simulation", "ibraheem2022-human") and spec.valid_only and spec.temperature == 0.0
    assert spec.models == ("openai/gpt-4-turbo",) and spec.prompt_version == "v2" and (spec.max_tokens or 0) >= 300
    offline = load_experiment(ROOT / "experiments" / "hidden_in_plain_text_offline.toml")
    for rule in ("n_players", "n_mafia", "day_seconds", "night_seconds", "scheduling", "call_seconds"):
        assert offline.rules[rule] == real.rules[rule]
    assert [i.format for i in offline.imports] == ["dallinger"]
    assert Path(offline.imports[0].path).resolve() == (FIXTURES / "dallinger").resolve()
    assert set(offline.detector.models) == {"policy/most-voted", "policy/random"}  # type: ignore[union-attr]


def test_run_detects_after_landing_and_detect_reruns_land_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    exp = tmp_path / "exp.toml"
    exp.write_text(
        'name = "small"\nvariant = "async"\ngames_per_cell = 3\nwarehouse = "w.duckdb"\n'
        "[rules]\nday_seconds = 40\nnight_seconds = 20\nn_players = 8\n"
        '[[cells]]\nname = "c"\nagents = {default = "scripted/naive"}\n'
        f'[[imports]]\nformat = "dallinger"\npath = "{FIXTURES / "dallinger"}"\n'
        '[detector]\nmodels = ["policy/most-voted", "policy/random"]\nimported = ["ibraheem2022-human"]\n'
    )
    assert cli(["run", str(exp), "--no-prefect", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "then: import dallinger:" in out and "then: detect:" in out
    con = duckdb.connect("w.duckdb", read_only=True)
    by_source = dict(con.execute(
        "select g.source, count(distinct d.game_id) from raw_detections d join raw_games g using (game_id) "
        "group by all").fetchall())
    n, = con.execute("select count(*) from raw_detections").fetchone()  # type: ignore[misc]
    n_transcripts, = con.execute("select count(*) from raw_detection_transcripts").fetchone()  # type: ignore[misc]
    con.close()
    assert by_source["simulation"] == 3 and by_source["ibraheem2022-human"] >= 1
    assert n_transcripts * 2 == n  # one transcript per (game, cut), read by both detectors
    # The command alone, with the experiment (plain path): nothing is missing, so nothing lands.
    assert cli(["detect", str(exp), "--no-prefect"]) == 0
    assert "0 landed" in capsys.readouterr().out
    # Another detector from the command line, on the human games only: lands only its own keys.
    assert cli(["detect", "--warehouse", "w.duckdb", "--model", "policy/random", "--model", "fake/d",
                "--source", "ibraheem2022-human", "--no-prefect", "--json"]) == 0
    con = duckdb.connect("w.duckdb", read_only=True)
    (fake,) = con.execute("select count(*) from raw_detections where detector = 'fake/d'").fetchone()  # type: ignore[misc]
    (after,) = con.execute("select count(*) from raw_detections").fetchone()  # type: ignore[misc]
    con.close()
    assert fake >= 1 and after == n + fake
    # The same model with another prompt file is another key: landed beside, never over, the v1 answers.
    mine = tmp_path / "mine.txt"
    mine.write_text("Players: $players. Exactly $k are mafia. Days 1-$cut:\n$transcript\nName them, one per line.")
    assert cli(["detect", "--warehouse", "w.duckdb", "--model", "fake/d", "--prompt-file", str(mine),
                "--source", "ibraheem2022-human", "--no-prefect"]) == 0
    con = duckdb.connect("w.duckdb", read_only=True)
    versions = dict(con.execute("select prompt_version, count(*) from raw_detections where detector = 'fake/d' "
                                "group by all").fetchall())
    con.close()
    assert versions == {"v1": fake, "file:mine.txt": fake}
    # A source with no game (a typo, or not imported yet) is named, not silently empty.
    assert cli(["detect", "--warehouse", "w.duckdb", "--model", "policy/random", "--source", "ibraheem2022-humans",
                "--no-prefect"]) == 0
    assert "no eligible game of source 'ibraheem2022-humans'" in capsys.readouterr().out


def test_detect_command_refuses_what_it_cannot_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["detect"]) == 2
    assert "--model" in capsys.readouterr().err
    exp = tmp_path / "exp.toml"
    exp.write_text(HEAD)
    assert cli(["detect", str(exp), "--no-prefect"]) == 2
    assert "no [detector] section" in capsys.readouterr().err
    assert cli(["detect", "--model", "policy/oracle", "--warehouse", str(tmp_path / "w.duckdb")]) == 2
    assert "policy/oracle" in capsys.readouterr().err
    (tmp_path / "bad.txt").write_text("Name the $k mafia among $players. $oops")
    assert cli(["detect", "--model", "fake/d", "--prompt-file", str(tmp_path / "bad.txt"),
                "--warehouse", str(tmp_path / "w.duckdb")]) == 2
    assert "bad.txt" in (err := capsys.readouterr().err) and "$oops" in err
    assert cli(["detect", "--model", "policy/random", "--warehouse", str(tmp_path / "none.duckdb")]) == 2
    assert "none.duckdb not found" in capsys.readouterr().err and not (tmp_path / "none.duckdb").exists()


@pytest.mark.slow
def test_detect_flow_on_prefect_lands_once(tmp_path: Path, prefect_harness: None) -> None:
    """The Prefect path: the flow imports, detects and returns the report; a second flow run lands nothing."""
    from mafiabench.detect.detection_runs import DetectorSpec
    from mafiabench.flows.detect import detect_flow

    wh = tmp_path / "w.duckdb"
    exp = tmp_path / "exp.toml"
    exp.write_text(
        'name = "f"\nvariant = "async"\n'
        f'warehouse = "{wh}"\n'
        '[[cells]]\nname = "c"\nagents = {default = "scripted/naive"}\n'
        f'[[imports]]\nformat = "llmafia"\npath = "{FIXTURES / "llmafia"}"\n'
        '[detector]\nmodels = ["policy/most-voted"]\nsimulated = false\nimported = ["llmafia"]\n'
    )
    study = tmp_path / "study.toml"
    study.write_text(
        'name = "s"\nvariant = "async"\ngames_per_cell = 2\n'
        f'warehouse = "{wh}"\n'
        "[rules]\nday_seconds = 40\nnight_seconds = 20\nn_players = 8\n"
        '[[cells]]\nname = "c"\nagents = {default = "scripted/naive"}\n'
        '[detector]\nmodels = ["policy/random"]\n'
    )
    from mafiabench.flows.study import study_flow

    first = asyncio.run(detect_flow(experiment_path=str(exp)))
    second = asyncio.run(detect_flow(warehouse=str(wh), spec=DetectorSpec(models=("policy/most-voted",),
                                                                           sources=("llmafia",))))
    summary = asyncio.run(study_flow(experiment_path=str(study), progress=False))
    assert first["imports"] and "llmafia" in first["imports"][0]
    assert first["landed"] == first["planned"] > 0 and not first["failed"]
    assert second["landed"] == 0 and second["already_landed"] == first["planned"]
    # The study flow detects after landing (its `detect` task), on its own games only.
    assert summary.games_played == 2 and any(line.startswith("detect: ") for line in summary.after)
    con = duckdb.connect(str(wh), read_only=True)
    rows = con.execute("select g.experiment, count(distinct d.game_id) from raw_detections d join raw_games g "
                       "using (game_id) where d.detector = 'policy/random' group by all").fetchall()
    con.close()
    assert rows == [("s", 2)]


def test_preview_estimates_the_model_detector() -> None:
    """One call per day cut of each game to play, the prompt over the cleansed transcript, priced; offline
    (policy) detectors cost nothing and get no line."""
    from mafiabench.study.estimate import estimate_plan

    est = estimate_plan(load_experiment(ROOT / "experiments" / "hidden_in_plain_text.toml"), samples=2)
    (spec, usage), = est.detection().items()
    assert spec == "openai/gpt-4-turbo"
    assert 35 <= usage.calls <= 35 * 10  # at least one cut a game, at most max_days
    # output counted at the detector's token cap (500: room for its reason)
    assert usage.input_tokens > usage.calls * 150 and usage.output_tokens == pytest.approx(500 * usage.calls, rel=0.02)
    assert usage.cost_usd > 0 and not usage.unpriced
    from mafiabench.commands.preview import render

    assert "openai/gpt-4-turbo " in render(est).split("Detector, on the games to play", 1)[1]
    offline = estimate_plan(load_experiment(ROOT / "experiments" / "hidden_in_plain_text_offline.toml"), samples=1)
    assert offline.detection() == {}

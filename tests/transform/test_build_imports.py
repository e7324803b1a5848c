"""What a build imports, and when: `mafiabench.publish` imports none of the game-playing code (the price table
validates itself: `prices` no longer reaches `play`, `agents` or `backends`), and `transform.models.import_beside`
imports every Python model's module on its own thread, swallowing an import that fails (the model's own import
raises it where the model runs)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mafiabench.transform import models


def test_importing_the_build_imports_no_game_playing_code() -> None:
    code = ("import sys, mafiabench.publish, mafiabench.commands.build; "
            "print(sorted(m for m in sys.modules if m.split('.')[:2] in "
            "(['mafiabench', 'play'], ['mafiabench', 'agents'], ['mafiabench', 'backends'])))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_import_beside_imports_every_models_module() -> None:
    code = ("import sys; from mafiabench.transform import models; models.import_beside().join(60); "
            "from mafiabench.transform.models import PYTHON_MODELS; "
            "wanted = {'mafiabench.transform.models.' + s.function.rpartition('.')[0] for s in PYTHON_MODELS}; "
            "print(sorted(wanted - set(sys.modules)), 'scipy.stats' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] True"


def test_an_import_that_fails_beside_is_left_to_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "_RUN_TIME_IMPORTS", ("mafiabench_no_such_module", "json"))
    tried: list[str] = []
    real = models.importlib.import_module

    def spy(name: str) -> object:
        tried.append(name)
        return real(name)

    monkeypatch.setattr(models.importlib, "import_module", spy)
    thread = models.import_beside()
    thread.join(60)
    assert not thread.is_alive() and tried[:2] == ["mafiabench_no_such_module", "json"]  # went on past the failure
    assert len(tried) > 2

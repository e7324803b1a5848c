"""The bar of build, import and detect (`study.progress.CountProgress`): on a pipe or a log it draws nothing (the
command's own lines only); its total is the sum of the parts it was told, said again alike; it names the latest thing
done as plain text, and what follows once all are done."""

from __future__ import annotations

import pytest

from mafiabench.study.progress import CountProgress


def test_nothing_is_drawn_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with CountProgress("build", "models") as bar:
        bar.expect("sql", 2)
        bar.done("a")
        bar.done("b")
    assert not bar.active and capsys.readouterr() == ("", "")


def test_the_parts_add_up_and_the_last_name_gives_way_to_what_follows() -> None:
    bar = CountProgress("build", "models", enabled=True, then="then the quality gate")
    task = bar._progress.tasks[0]
    bar.expect("python", 1)
    bar.expect("sql", 2)
    bar.expect("sql", 2)  # dbt says its total with every model
    assert task.total == 3
    bar.done("[bold]stg_games")  # markup in a name is shown as written (a game id is data)
    assert task.fields["latest"] == "[bold]stg_games" and task.completed == 1
    bar.done("b")
    bar.done("c")
    assert task.completed == 3 and task.fields["latest"] == "then the quality gate"
    bar.done("d")  # more than announced (a Mini-Mafia batch without games): the total follows
    assert task.total == 4

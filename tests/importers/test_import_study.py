"""An import is one study: Mini-Mafia batches of two prompt versions and several model configurations become
cells keyed by the model in each role and the prompt version, batches of the same cell merge, the batch id stays on
each game, and the bottom-up scores and the latent model see every target of a background."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from mafiabench.importers import run_import
from mafiabench.publish import build_warehouse
from mafiabench.warehouse.raw import connect

MODELS = {"A": ("openai", "gpt-4.1-mini"), "B": ("deepseek", "deepseek-chat"), "C": ("xai", "grok-3-mini"),
          "D": ("anthropic", "claude-3-5-haiku-latest")}
CANONICAL = {"A": "openai/gpt-4.1-mini", "B": "deepseek/deepseek-chat", "C": "xai/grok-3-mini",
             "D": "anthropic/claude-3.5-haiku"}
# True abilities (logit P(mafia wins) = c_k (a_i - b_j)): deceive a, disclose b, detect log c.
A = {"A": 0.6, "B": -0.4, "C": 0.2, "D": -0.8}
B = {"A": 0.3, "B": 0.5, "C": -0.5, "D": 0.0}
G = {"A": 0.0, "B": 0.2, "C": -0.2, "D": 0.1}
NAMES = ["Alice", "Bob", "Charlie", "Diana"]


def write_game(folder: Path, n: int, roles: list[str], victim: str, arrested: str) -> None:
    """One game in the reference tool's memory shapes (see tests/fixtures/datasets/mini_mafia/README.md)."""
    role = dict(zip(NAMES, roles, strict=True))
    mafioso = next(k for k, v in role.items() if v == "mafioso")
    detective = next(k for k, v in role.items() if v == "detective")
    alive = [k for k in NAMES if k != victim]
    mem = {k: [f"You're {k}, the {v}."] for k, v in role.items()}
    for k in alive:
        mem[k].append("Night 1 begins.")
    mem[mafioso].append(f"You killed {victim}.")
    for k in alive:
        mem[k].append(f"The villager {victim} was found dead.")
    mem[detective].append(f"You investigated {mafioso} and discovered that they are the mafioso.")
    for k in NAMES:
        mem[k].append("Day 1 begins.")
    for speaker in alive:
        for k in alive:
            # Each game's talk is its own (the gate refuses games copied under another id).
            mem[k].append(f'{"You" if k == speaker else speaker}: "{folder.name} #{n}: I think it is {arrested}."')
    other = next(k for k in alive if k != arrested)
    votes = ", ".join(f"{k} voted for {other if k == arrested else arrested}" for k in alive)
    for k in alive:
        if k != arrested:
            mem[k] += [f"Votes: {votes}", f"{arrested} was arrested"]
    players = [{"name": k, "role": role[k], "alive": k != victim, "imprisoned": k == arrested, "memory": mem[k]}
               for k in NAMES]
    folder.joinpath(f"game_{n:04d}.json").write_text(json.dumps(
        {"game_id": f"{folder.name}_game_{n:04d}", "game_number": n, "timestamp": "2025-08-20T10:00:00",
         "players": players}))


def write_batch(root: Path, batch_id: str, version: str, m: str, d: str, v: str, games: int,
                rng: np.random.Generator) -> int:
    folder = root / batch_id
    folder.mkdir(parents=True)
    folder.joinpath("batch_config.json").write_text(json.dumps({
        "batch_id": batch_id, "timestamp": "2025-08-20T10:00:00",
        "prompt_config": {"version": version, "message_limit": 200, "templates": {"base_prompt": version}},
        "model_configs": {role: {"type": MODELS[x][0], "model": MODELS[x][1], "temperature": 0.7}
                          for role, x in (("mafioso", m), ("detective", d), ("villager", v))},
        "game_type": "mini_mafia"}))
    p = 1 / (1 + math.exp(-math.exp(G[v]) * (A[m] - B[d])))
    wins = 0
    for n in range(games):
        roles = list(rng.permutation(["mafioso", "detective", "villager", "villager"]))
        villagers = [NAMES[i] for i, r in enumerate(roles) if r == "villager"]
        victim = villagers[int(rng.integers(2))]
        mafia_wins = bool(rng.random() < p)
        wins += mafia_wins
        arrested = (next(k for k in villagers if k != victim) if mafia_wins
                    else NAMES[roles.index("mafioso")])
        write_game(folder, n, roles, victim, arrested)
    return wins


def test_two_prompt_versions_and_many_configurations_make_one_study(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    root = tmp_path / "published"
    stamp = 0
    mafia_wins: dict[tuple[str, str, str, str], int] = {}
    for version, games in (("v4.0", 40), ("v4.1", 60)):
        for bg in ("A", "B"):
            for t in "ABCD":
                cells = [(t, bg, bg)] + ([(bg, bg, t), (bg, t, bg)] if t != bg else [])
                for m, d, v in cells:
                    # one v4.1 cell is split over two batches: they merge into one cell
                    parts = [games // 2, games - games // 2] if (version, m, d, v) == ("v4.1", "C", "A", "A") \
                        else [games]
                    for part in parts:
                        stamp += 1
                        batch = f"batch_202508{20 + stamp // 60:02d}_{stamp:06d}_{version}"
                        key = (version, m, d, v)
                        mafia_wins[key] = mafia_wins.get(key, 0) + write_batch(root, batch, version, m, d, v,
                                                                               part, rng)
    con = connect(tmp_path / "w.duckdb")
    report = run_import("mini-mafia", root, con)
    assert report.studies == {"published": 2 * (10 * 2 * 40 // 2) + 2 * (10 * 2 * 60 // 2)}
    assert report.valid == report.landed and not report.unreadable
    # the batch id stays on each game; a split cell keeps both batch ids under one cell name
    split = con.execute("""select experiment, count(distinct batch_id), count(*) from raw_games
                           where cell = 'deceive|xai/grok-3-mini|openai/gpt-4.1-mini|prompt=v4.1'
                           group by experiment""").fetchall()
    assert split == [("published", 2, 60)]
    build_warehouse(con)

    cells = con.execute("""select prompt_version, capability, target_model, background, n, k
                           from mart_capability_win_rates where study = 'published'""").fetchall()
    by = {(r[0], r[1], r[2], r[3]): (r[4], r[5]) for r in cells}
    # the split cell is one cell with all 60 games, its k the mafia wins written into both batches
    assert by[("v4.1", "deceive", CANONICAL["C"], CANONICAL["A"])] == (60, mafia_wins[("v4.1", "C", "A", "A")])
    # the same models under v4.0 are another cell
    assert by[("v4.0", "deceive", CANONICAL["C"], CANONICAL["A"])] == (40, mafia_wins[("v4.0", "C", "A", "A")])
    # detect counts town wins
    assert by[("v4.0", "detect", CANONICAL["D"], CANONICAL["B"])] == (40, 40 - mafia_wins[("v4.0", "B", "B", "D")])

    scores = con.execute("""select prompt_version, capability, target_model, n_backgrounds, score, score_low,
                                   score_high from mart_capability_scores where study = 'published'""").fetchall()
    assert len(scores) == 2 * 3 * 4  # every version x capability x target
    assert all(r[3] == 2 and 0 < r[5] < r[4] < r[6] and math.isfinite(r[6]) for r in scores)

    fits = con.execute("select prompt_version, n_games, n_cells, converged from mart_latent_fit "
                       "where study = 'published' order by prompt_version").fetchall()
    assert fits == [("v4.0", 800, 20, True), ("v4.1", 1200, 20, True)]
    abilities = con.execute("""select prompt_version, ability, model, estimate, se, ci_low, ci_high
                               from mart_latent_abilities where study = 'published'""").fetchall()
    assert len(abilities) == 2 * 3 * 4
    for version, ability, model, est, se, low, high in abilities:
        assert all(math.isfinite(x) for x in (est, se, low, high)), (version, ability, model)
        assert low < est < high and se < 0.6, (version, ability, model, se)
    # the fitted mafioso abilities order the models as the truth does (v4.1, the larger sample)
    deceive = {r[2]: r[3] for r in abilities if r[0] == "v4.1" and r[1] == "deceive"}
    assert deceive[CANONICAL["A"]] > deceive[CANONICAL["D"]]
    con.close()


def test_a_warehouse_from_before_batch_ids_gains_the_column(tmp_path: Path) -> None:
    import duckdb

    from mafiabench.warehouse.raw import RAW_SCHEMA

    path = tmp_path / "old.duckdb"
    old = duckdb.connect(str(path))
    old.execute(f"create table raw_games ({RAW_SCHEMA['raw_games'].replace(', batch_id VARCHAR', '')})")
    old.close()
    con = connect(path)
    columns = [r[0] for r in con.execute("describe raw_games").fetchall()]
    assert columns[-1] == "batch_id"
    report = run_import("mini-mafia", Path(__file__).parents[1] / "fixtures" / "datasets" / "mini_mafia", con)
    assert report.landed == 7
    batches = con.execute("select count(distinct batch_id), count(batch_id) from raw_games").fetchone()
    assert batches == (3, 7)
    con.close()

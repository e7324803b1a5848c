"""The dataset profile per source and the invalid games by reason; the profile read from int_profile_counts (counts by
source, variant, validity, players and days, which an increment adds to) is every valid game's aggregate."""

from __future__ import annotations

import pytest

from support.records import engine_records, landed, mini_record, one, rows


def test_profile_per_source() -> None:
    c = landed(
        [
            mini_record("s1", messages=[("Alice", "a b c"), ("Bob", "d e")]),
            mini_record("s2", messages=[("Alice", "one"), ("Bob", None)]),
            mini_record("h1", source="naacl", messages=[("Alice", "x y z w")]),
            mini_record("h2", source="naacl", valid=False, invalid_reason="no votes cast"),
            mini_record("h3", source="naacl", valid=False, invalid_reason="no votes cast"),
            mini_record("h4", source="naacl", valid=False, invalid_reason="no winner recorded"),
        ],
        only=["mart_dataset_profile", "mart_dataset_invalid"],
    )
    sim = one(c, "select * from mart_dataset_profile where source = 'simulation'")
    assert (sim["games"], sim["invalid_games"], sim["participants_max"], sim["participants_min"]) == (2, 0, 4, 4)
    assert (sim["days_max"], sim["days_mean"], sim["days_min"], sim["share_at_most_3_days"]) == (1, 1.0, 1, 1.0)
    assert sim["utterances_per_game"] == 1.5  # the silence is not an utterance
    assert sim["words_per_utterance"] == 2.0  # (3 + 2 + 1) / 3
    assert sim["variant"] == "mini-mafia"
    nac = one(c, "select * from mart_dataset_profile where source = 'naacl'")
    assert (nac["games"], nac["invalid_games"], nac["words_per_utterance"]) == (1, 3, 4.0)
    reasons = rows(c, "select source, invalid_reason, games from mart_dataset_invalid order by invalid_reason")
    assert [(r["invalid_reason"], r["games"]) for r in reasons] == [("no votes cast", 2), ("no winner recorded", 1)]


def test_simulated_variants_are_profiled_apart() -> None:
    """Async and Mini-Mafia games of one warehouse are two rows, so each sits beside the dataset it is compared
    with (metrics.md §9)."""
    async_game = mini_record("a1", messages=[("Alice", "x")])
    async_game.variant = "async"  # the profile groups by the recorded variant; the rest of the game is irrelevant
    c = landed([mini_record("m1", messages=[("Alice", "a b")]), async_game], only=["mart_dataset_profile"])
    got = rows(c, "select source, variant, games from mart_dataset_profile order by variant")
    assert [(r["source"], r["variant"], r["games"]) for r in got] == [("simulation", "async", 1),
                                                                      ("simulation", "mini-mafia", 1)]


@pytest.mark.parametrize(
    "text",
    ["one", "a b c", "a  b", "  padded  ", "", " ", "tab\there too", "é ü ñ", "trailing ", "x" * 300 + " y"],
)
def test_a_message_has_as_many_words_as_pieces_between_single_spaces(text: str) -> None:
    """int_turns counts a message's words as `string_split(trim(text), ' ')` pieces (one more than its spaces,
    without building the list): Python's `split(' ')` of the same trimmed text is the hand count. Only int_turns and
    what it reads are built (a fifth of a whole build's time)."""
    c = landed([mini_record("w1", messages=[("Alice", text)])], only=["int_turns"])
    got = one(c, "select words from int_turns where event_type = 'message'")
    assert got["words"] == len(text.strip(" ").split(" "))


# The profile as an aggregate over every game (mart_dataset_profile's SQL before it read int_profile_counts).
OVER_EVERY_GAME = """
    with valid_games as (select * from fct_games where valid),
    profile as (
        select source, variant, count(*) as games, max(n_players) as participants_max,
            avg(n_players) as participants_mean, min(n_players) as participants_min, max(days) as days_max,
            avg(days) as days_mean, min(days) as days_min,
            avg(case when days <= 3 then 1.0 else 0.0 end) as share_at_most_3_days,
            avg(n_messages) as utterances_per_game,
            case when sum(n_messages) > 0 then sum(n_words) * 1.0 / sum(n_messages) end as words_per_utterance
        from valid_games group by source, variant
    ),
    invalid as (select source, variant, count(*) as invalid_games from fct_games where not valid group by all)
    select s.source, s.variant, coalesce(p.games, 0) as games, coalesce(i.invalid_games, 0) as invalid_games,
        p.* exclude (source, variant, games)
    from (select distinct source, variant from fct_games) as s
    left join profile as p using (source, variant) left join invalid as i using (source, variant)
    order by all
"""


def test_the_profile_is_every_valid_game_aggregated() -> None:
    """Games of several lengths (1-5 days), twelve-player classic games, a source of invalid games only, a game
    without utterances: each column equals its aggregate over fct_games' valid games."""
    records = [*engine_records(8, seed=3), *engine_records(6, seed=4, variant="classic",
                                                          rules={"n_players": 12, "n_mafia": 3}),
               mini_record("h1", source="naacl", messages=[("Alice", "x y z w")]),
               mini_record("h2", source="naacl"),
               mini_record("b1", source="other", valid=False, invalid_reason="no votes cast")]
    c = landed(records, only=["mart_dataset_profile"])
    got = rows(c, "select * from mart_dataset_profile order by all")
    want = rows(c, OVER_EVERY_GAME)
    assert len({r["days"] for r in rows(c, "select days from fct_games")}) >= 3  # the shares are not all 0 or 1
    assert [r["source"] for r in got] == ["naacl", "other", "simulation", "simulation"]
    assert [r.keys() for r in got] == [r.keys() for r in want]
    for g, w in zip(got, want, strict=True):
        for column, value in w.items():
            assert g[column] == (pytest.approx(value, rel=1e-12) if isinstance(value, float) else value), column

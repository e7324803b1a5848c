"""The dataset profile per source and the invalid games by reason."""

from __future__ import annotations

import pytest

from support.records import landed, mini_record, one, rows


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

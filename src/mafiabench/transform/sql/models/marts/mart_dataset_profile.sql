{#- It reads int_profile_counts (games counted by source, variant, validity, players and days), not every game: an
    increment then reads a few rows. Each column is the one an aggregate over fct_games' valid games gives: a max or
    min off the keys, a mean as a sum over a count of the games that have the value (avg skips a null). -#}
with counts as (
    select * from {{ ref('int_profile_counts') }}
),

valid_games as (
    select * from counts where valid
),

profile as (
    select
        source,
        variant,
        sum(games)::bigint as games,
        max(n_players) as participants_max,
        sum(n_players * games) / sum(games) filter (where n_players is not null) as participants_mean,
        min(n_players) as participants_min,
        max(days) as days_max,
        sum(days * games) / sum(games) filter (where days is not null) as days_mean,
        min(days) as days_min,
        coalesce(sum(games) filter (where days <= 3), 0) / sum(games) as share_at_most_3_days,
        case when sum(games_with_messages) > 0 then sum(n_messages) / sum(games_with_messages) end
            as utterances_per_game,
        case when sum(n_messages) > 0 then sum(n_words) * 1.0 / sum(n_messages) end as words_per_utterance
    from valid_games
    group by source, variant
),

invalid as (
    select source, variant, sum(games)::bigint as invalid_games from counts where not valid group by source, variant
),

sources as (
    -- A row per variant of a source: a warehouse may hold simulated Mini-Mafia and async games alike, and each is
    -- compared with a different dataset.
    select distinct source, variant from counts
),

final as (
    select
        s.source,
        s.variant,
        coalesce(p.games, 0) as games,
        coalesce(i.invalid_games, 0) as invalid_games,
        p.participants_max,
        p.participants_mean,
        p.participants_min,
        p.days_max,
        p.days_mean,
        p.days_min,
        p.share_at_most_3_days,
        p.utterances_per_game,
        p.words_per_utterance
    from sources as s
    left join profile as p on p.source = s.source and p.variant = s.variant
    left join invalid as i on i.source = s.source and i.variant = s.variant
)

select * from final

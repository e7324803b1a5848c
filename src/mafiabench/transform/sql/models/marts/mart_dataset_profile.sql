with games as (
    select * from {{ ref('fct_games') }}
),

valid_games as (
    select * from games where valid
),

profile as (
    select
        source,
        variant,
        count(*) as games,
        max(n_players) as participants_max,
        avg(n_players) as participants_mean,
        min(n_players) as participants_min,
        max(days) as days_max,
        avg(days) as days_mean,
        min(days) as days_min,
        avg(case when days <= 3 then 1.0 else 0.0 end) as share_at_most_3_days,
        avg(n_messages) as utterances_per_game,
        case when sum(n_messages) > 0 then sum(n_words) * 1.0 / sum(n_messages) end as words_per_utterance
    from valid_games
    group by source, variant
),

invalid as (
    select source, variant, count(*) as invalid_games from games where not valid group by source, variant
),

sources as (
    -- A row per variant of a source: a warehouse may hold simulated Mini-Mafia and async games alike, and each is
    -- compared with a different dataset.
    select distinct source, variant from games
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

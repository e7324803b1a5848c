{#- The dataset profile's games counted by source, variant, validity, players and days: a few rows for a million
    games, which an increment adding games adds its own games' counts to (macros/increment.sql), so
    mart_dataset_profile reads these rather than every game. Players and days are keys, not sums: their max and min
    are read off the keys, their means summed from them. -#}
{{ config(materialized='summed', meta={'sum_keys': ['source', 'variant', 'valid', 'n_players', 'days'],
                                       'sum_rows': 'games'}) }}

with games as (
    select source, variant, valid, n_players, days, n_messages, n_words from {{ ref('fct_games') }}
),

final as (
    select
        source,
        variant,
        valid,
        n_players,
        days,
        count(*) as games,
        count(n_messages) as games_with_messages,
        coalesce(sum(n_messages), 0)::hugeint as n_messages,
        coalesce(sum(n_words), 0)::hugeint as n_words
    from games
    group by source, variant, valid, n_players, days
)

select * from final

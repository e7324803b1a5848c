{#- Counts of games by every game-level grouping mart_win_rates (and mart_exceptional_games' cells) read: a few rows
    for a million games, which an increment adding games adds its own games' counts to (macros/increment.sql). -#}
{{ config(materialized='summed', meta={'sum_keys': ['variant', 'experiment', 'study', 'prompt_version', 'cell',
                                                    'source'], 'sum_rows': 'games'}) }}

with games as (
    select variant, experiment, study, prompt_version, cell, source, is_scored, winner, tie_decided,
        fallback_decided, status, valid
    from {{ ref('fct_games') }}
),

final as (
    select
        variant,
        experiment,
        study,
        prompt_version,
        cell,
        source,
        count(*) filter (where is_scored) as n,
        count(*) filter (where is_scored and winner = 'mafia') as k,
        count(*) filter (where is_scored and winner = 'mafia' and tie_decided) as k_tie,
        count(*) filter (where is_scored and tie_decided) as n_tie_decided,
        count(*) filter (where is_scored and fallback_decided) as n_fallback_decided,
        count(*) filter (where status = 'unfinished') as n_unfinished,
        count(*) filter (where not valid) as n_invalid,
        count(*) as games
    from games
    group by variant, experiment, study, prompt_version, cell, source
)

select * from final

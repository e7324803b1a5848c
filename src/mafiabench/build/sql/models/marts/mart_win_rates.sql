with games as (
    select * from {{ ref('fct_games') }}
),

game_groups as (
    -- Game-level groupings count mafia wins; each game once.
    select variant, 'all' as dimension, 'all' as value, 'mafia' as team, game_id from games
    union all
    select variant, 'experiment', coalesce(experiment, '(none)'), 'mafia', game_id from games
    union all
    select variant, 'study', study, 'mafia', game_id from games
    union all
    select variant, 'prompt_version', coalesce(prompt_version, '(none)'), 'mafia', game_id from games
    union all
    select variant, 'cell', cell, 'mafia', game_id from games
    union all
    select variant, 'source', source, 'mafia', game_id from games
),

role_groups as (
    -- A model in a role counts the wins of that role's team, once per game (two villagers of one model = 1).
    select distinct variant, 'model_as_' || role as dimension, model as value, team, game_id
    from {{ ref('int_player_games') }}
),

groups as (
    select * from game_groups
    union all
    select * from role_groups
),

counted as (
    select
        gr.variant,
        gr.dimension,
        gr.value,
        gr.team,
        count(*) filter (where g.is_scored) as n,
        count(*) filter (where g.is_scored and g.winner = gr.team) as k,
        count(*) filter (where g.is_scored and g.winner = gr.team and g.tie_decided) as k_tie,
        count(*) filter (where g.is_scored and g.tie_decided) as n_tie_decided,
        count(*) filter (where g.is_scored and g.fallback_decided) as n_fallback_decided,
        count(*) filter (where g.status = 'unfinished') as n_unfinished,
        count(*) filter (where not g.valid) as n_invalid
    from groups as gr
    inner join games as g on g.game_id = gr.game_id
    group by gr.variant, gr.dimension, gr.value, gr.team
),

final as (
    select
        variant,
        dimension,
        value,
        team,
        n,
        k,
        k_tie,
        k - k_tie as k_clean,
        case when n > 0 then k * 1.0 / n end as rate,
        case when n > 0 then k_tie * 1.0 / n end as rate_tie,
        case when n > 0 then (k - k_tie) * 1.0 / n end as rate_clean,
        {{ rate_columns('k', 'n') }},
        n_tie_decided,
        n_fallback_decided,
        case when n > 0 then n_fallback_decided * 1.0 / n end as share_fallback_decided,
        n_unfinished,
        n_invalid
    from counted
)

select * from final

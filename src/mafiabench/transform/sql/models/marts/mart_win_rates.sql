{#- What a grouping row needs of its game to be counted: carried on every row, so no join back to the games. -#}
{%- set outcome = "is_scored, winner, tie_decided, fallback_decided, status, valid" %}

with games as (
    select
        game_id, variant, experiment, study, prompt_version, cell, source,
        {{ outcome }}
    from {{ ref('fct_games') }}
),

game_groups as (
    -- Game-level groupings count mafia wins; each game once.
    select variant, 'all' as dimension, 'all' as value, '' as model_settings, 'mafia' as team, {{ outcome }}
    from games
    union all
    select variant, 'experiment', coalesce(experiment, '(none)'), '', 'mafia', {{ outcome }} from games
    union all
    select variant, 'study', study, '', 'mafia', {{ outcome }} from games
    union all
    select variant, 'prompt_version', coalesce(prompt_version, '(none)'), '', 'mafia', {{ outcome }} from games
    union all
    select variant, 'cell', cell, '', 'mafia', {{ outcome }} from games
    union all
    select variant, 'source', source, '', 'mafia', {{ outcome }} from games
),

role_groups as (
    -- A model in a role counts the wins of that role's team, once per game (two villagers of one model = 1); a
    -- study that played the model under several settings (two temperatures) gets a row per setting.
    select r.variant, r.dimension, r.value, r.model_settings, r.team, {{ outcome }}
    from (
        select distinct
            variant, 'model_as_' || role as dimension, model as value,
            case when settings_varied then model_settings else '' end as model_settings, team, game_id
        from {{ ref('fct_player_games') }}
    ) as r
    inner join games as g on g.game_id = r.game_id
),

groups as (
    select * from game_groups
    union all
    select * from role_groups
),

counted as (
    select
        variant,
        dimension,
        value,
        model_settings,
        team,
        count(*) filter (where is_scored) as n,
        count(*) filter (where is_scored and winner = team) as k,
        count(*) filter (where is_scored and winner = team and tie_decided) as k_tie,
        count(*) filter (where is_scored and tie_decided) as n_tie_decided,
        count(*) filter (where is_scored and fallback_decided) as n_fallback_decided,
        count(*) filter (where status = 'unfinished') as n_unfinished,
        count(*) filter (where not valid) as n_invalid
    from groups
    group by variant, dimension, value, model_settings, team
),

final as (
    select
        variant,
        dimension,
        value,
        model_settings,
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

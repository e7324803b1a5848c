{%- set totals = ["n", "k", "k_tie", "n_tie_decided", "n_fallback_decided", "n_unfinished", "n_invalid"] %}

with games as (
    -- The games counted per combination of their groupings (a few rows for a million games), each grouping below
    -- adding up the combinations it spans: the counts of counting the games one by one.
    select * from {{ ref('int_game_outcome_counts') }}
),

game_groups as (
    -- Game-level groupings count mafia wins; each game once.
    select variant, 'all' as dimension, 'all' as value, '' as model_settings, 'mafia' as team, {{ totals | join(', ') }}
    from games
    union all
    select variant, 'experiment', coalesce(experiment, '(none)'), '', 'mafia', {{ totals | join(', ') }} from games
    union all
    select variant, 'study', study, '', 'mafia', {{ totals | join(', ') }} from games
    union all
    select variant, 'prompt_version', coalesce(prompt_version, '(none)'), '', 'mafia', {{ totals | join(', ') }}
    from games
    union all
    select variant, 'cell', cell, '', 'mafia', {{ totals | join(', ') }} from games
    union all
    select variant, 'source', source, '', 'mafia', {{ totals | join(', ') }} from games
),

roles as (
    -- A model in a role counts the wins of that role's team, once per game (two villagers of one model = 1),
    -- counted per study and by the seats' own settings (int_role_outcome_counts).
    select * from {{ ref('int_role_outcome_counts') }}
),

settings_per_model as (
    -- A study that played the model under several settings (two temperatures) gets a row per setting: as
    -- fct_player_games.settings_varied, from every setting the study's seats of the model had (a seat whose
    -- settings are unknown, '', is no other setting).
    select study, model, count(distinct nullif(model_settings, '')) > 1 as settings_varied
    from roles
    where per_setting
    group by study, model
),

role_groups as (
    select
        r.variant, 'model_as_' || r.role as dimension, r.model as value, r.model_settings, r.team,
        {{ totals | join(', ') }}
    from roles as r
    left join settings_per_model as v on v.study = r.study and v.model = r.model
    where r.per_setting = coalesce(v.settings_varied, false)
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
{%- for total in totals %}
        sum({{ total }})::bigint as {{ total }}{{ "," if not loop.last }}
{%- endfor %}
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

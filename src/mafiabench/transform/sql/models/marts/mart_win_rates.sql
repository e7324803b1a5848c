{#- A grouping row's counts over its scored games: `WON` is "the row's team won". -#}
{%- set scored_counts = [
    ("n", "is_scored"),
    ("k", "is_scored and WON"),
    ("k_tie", "is_scored and WON and tie_decided"),
    ("n_tie_decided", "is_scored and tie_decided"),
    ("n_fallback_decided", "is_scored and fallback_decided"),
] %}
{%- set totals = ["n", "k", "k_tie", "n_tie_decided", "n_fallback_decided", "n_unfinished", "n_invalid"] %}

with games as (
    -- The games counted per combination of their groupings (a few rows for a million games), each grouping below
    -- adding up the combinations it spans: the counts of counting the games one by one.
    select
        variant, experiment, study, prompt_version, cell, source,
{%- for name, condition in scored_counts %}
        count(*) filter (where {{ condition | replace("WON", "winner = 'mafia'") }}) as {{ name }},
{%- endfor %}
        count(*) filter (where status = 'unfinished') as n_unfinished,
        count(*) filter (where not valid) as n_invalid
    from {{ ref('fct_games') }}
    group by variant, experiment, study, prompt_version, cell, source
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

seats as (
    -- A model in a role counts the wins of that role's team, once per game (two villagers of one model = 1); a
    -- study that played the model under several settings (two temperatures) gets a row per setting. The game's
    -- outcome is carried on every player's row (no join back to the games).
    select distinct
        variant, 'model_as_' || role as dimension, model as value,
        case when settings_varied then model_settings else '' end as model_settings, team, game_id,
        is_scored, won, tie_decided, fallback_decided
    from {{ ref('fct_player_games') }}
),

flagged as (
    -- The games an unfinished or invalid count needs, the only outcome a player's row does not carry.
    select game_id, status = 'unfinished' as unfinished, not valid as invalid
    from {{ ref('fct_games') }}
    where status = 'unfinished' or not valid
),

role_groups as (
    select
        s.variant, s.dimension, s.value, s.model_settings, s.team,
{%- for name, condition in scored_counts %}
        count(*) filter (where {{ condition | replace("WON", "won") }}) as {{ name }},
{%- endfor %}
        count(*) filter (where f.unfinished) as n_unfinished,
        count(*) filter (where f.invalid) as n_invalid
    from seats as s
    left join flagged as f on f.game_id = s.game_id
    group by s.variant, s.dimension, s.value, s.model_settings, s.team
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

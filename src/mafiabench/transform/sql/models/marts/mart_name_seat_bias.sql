with players as (
    -- Only players who played a day: a Mini-Mafia night victim never spoke or voted, its "win" is its team's.
    select * from {{ ref('fct_player_games') }} where is_scored and played_a_day
),

settings as (
    select *, 'all' as setting from players
    union all
    select *, 'no_communication' as setting from players where not has_communication
),

keyed as (
    select variant, setting, 'name' as dimension, name as value, role, won, tie_decided from settings
    union all
    -- A source without seats (Mini-Mafia batches list players by name) says so: 'unknown', never a guess.
    select variant, setting, 'seat', coalesce(cast(seat as varchar), 'unknown'), role, won, tie_decided from settings
),

counted as (
    select
        variant, setting, dimension, value, coalesce(role, 'all') as role,
        count(*) as n,
        count(*) filter (where won) as k,
        count(*) filter (where won and tie_decided) as k_tie
    from keyed
    group by grouping sets ((variant, setting, dimension, value, role), (variant, setting, dimension, value))
),

final as (
    select
        variant,
        setting,
        dimension,
        value,
        role,
        n,
        k,
        k_tie,
        k - k_tie as k_clean,
        {{ rate_columns('k', 'n') }}
    from counted
)

select * from final

with players as (
    -- Only players who played a day: a Mini-Mafia night victim never spoke or voted, its "win" is its team's. Each
    -- study is read on its own (a warehouse may hold the published Mini-Mafia study beside a new run).
    select * from {{ ref('fct_player_games') }} where is_scored and played_a_day
),

settings as (
    select *, 'all' as setting from players
    union all
    select *, 'no_communication' as setting from players where not has_communication
),

name_genders as (
    -- The Mini-Mafia study's grouping of its four names (serendipitous_results/name_bias.py): Male = Bob, Charlie;
    -- Female = Alice, Diana. Other names have no gender row.
    select * from (values ('Alice', 'female'), ('Bob', 'male'), ('Charlie', 'male'), ('Diana', 'female'))
        as t (name, gender)
),

keyed as (
    select study, variant, setting, 'name' as dimension, name as value, role, won, tie_decided from settings
    union all
    select s.study, s.variant, s.setting, 'gender', g.gender, s.role, s.won, s.tie_decided
    from settings as s
    inner join name_genders as g on g.name = s.name
    union all
    -- A source without seats (Mini-Mafia batches list players by name) says so: 'unknown', never a guess.
    select study, variant, setting, 'seat', coalesce(cast(seat as varchar), 'unknown'), role, won, tie_decided
    from settings
),

counted as (
    select
        study, variant, setting, dimension, value, coalesce(role, 'all') as role,
        count(*) as n,
        count(*) filter (where won) as k,
        count(*) filter (where won and tie_decided) as k_tie
    from keyed
    group by grouping sets (
        (study, variant, setting, dimension, value, role), (study, variant, setting, dimension, value)
    )
),

final as (
    select
        study,
        variant,
        setting,
        dimension,
        value,
        role,
        n,
        k,
        k_tie,
        k - k_tie as k_clean,
        {{ rate_columns('k', 'n') }},
        {{ normal_low('k', 'n') }} as normal_low,
        {{ normal_high('k', 'n') }} as normal_high
    from counted
)

select * from final

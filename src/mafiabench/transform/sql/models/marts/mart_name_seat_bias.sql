with players as (
    -- Only players who played a day: a Mini-Mafia night victim never spoke or voted, its "win" is its team's. Each
    -- study is read on its own (a warehouse may hold the published Mini-Mafia study beside a new run). Players
    -- alike in every column read below are counted together (a few hundred rows for a million games).
    select study, variant, has_communication, name, seat, role, won, tie_decided, sum(players)::bigint as players
    from {{ ref('int_player_outcome_counts') }}
    where played_a_day
    group by all
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
    select study, variant, setting, 'name' as dimension, name as value, role, won, tie_decided, players
    from settings
    union all
    select s.study, s.variant, s.setting, 'gender', g.gender, s.role, s.won, s.tie_decided, s.players
    from settings as s
    inner join name_genders as g on g.name = s.name
    union all
    -- A source without seats (Mini-Mafia batches list players by name) says so: 'unknown', never a guess.
    select study, variant, setting, 'seat', coalesce(cast(seat as varchar), 'unknown'), role, won, tie_decided,
        players
    from settings
),

counted as (
    select
        study, variant, setting, dimension, value, coalesce(role, 'all') as role,
        sum(players)::bigint as n,
        coalesce(sum(players) filter (where won), 0)::bigint as k,
        coalesce(sum(players) filter (where won and tie_decided), 0)::bigint as k_tie
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

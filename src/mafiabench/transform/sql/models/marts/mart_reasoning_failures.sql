with patterns as (
    -- Counted per variant, prompt version (each its own experiment: never pooled), level, model and the level's role,
    -- and per game pattern (int_reasoning_counts: games holding m tests, f of them failed): one role a level.
    select
        *,
        sum(k) over key * 1.0 / sum(n) over key as key_rate
    from {{ ref('int_reasoning_counts') }}
    window key as (partition by variant, prompt_version, level, model)
),

counted as (
    -- `residuals`: the sum over games of (f - rate * m)^2, for the game-clustered sd.
    select
        variant,
        prompt_version,
        level,
        model,
        any_value(voter_role) as role,
        sum(n)::bigint as n,
        sum(k)::bigint as k,
        sum(k_random_fallback)::bigint as k_random_fallback,
        sum(n_games)::bigint as n_games,
        sum(n_games * (f - key_rate * m) * (f - key_rate * m)) as residuals
    from patterns
    group by all
),

sds as (
    -- The rate's sd with the game as the unit (macros/stats.sql).
    select *, {{ sd_by_game('n_games', 'residuals', 'n') }} as sd_by_game from counted
),

by_game as (
    -- Its design effect, for the Wilson interval on the effective sample size n / design_effect.
    select *, {{ design_effect('k', 'n', 'sd_by_game') }} as design_effect from sds
),

final as (
    select
        variant,
        prompt_version,
        level,
        model,
        role,
        n as n_opportunities,
        k as n_failures,
        k_random_fallback as n_failures_by_fallback,
        n_games,
        k * 1.0 / n as rate,
        {{ rate_columns('k', 'n') }},
        {{ rate_by_game_columns('k', 'n') }}
    from by_game
)

select * from final

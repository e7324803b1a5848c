with patterns as (
    -- The decisions counted per variant, prompt version (each its own experiment: never pooled), model, role and
    -- action, and per game pattern (int_decision_counts: games holding m such decisions, f of them failures).
    select
        *,
        sum(k) over key * 1.0 / sum(n) over key as key_rate
    from {{ ref('int_decision_counts') }}
    window key as (partition by variant, prompt_version, model, role, action)
),

counted as (
    -- `residuals`: the sum over games of (f - rate * m)^2, for the game-clustered sd.
    select
        variant,
        prompt_version,
        model,
        role,
        action,
        sum(n)::bigint as n,
        sum(k)::bigint as k,
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
        model,
        role,
        action,
        n as n_decisions,
        k as n_format_failures,
        n_games,
        k * 1.0 / n as rate,
        {{ rate_columns('k', 'n') }},
        {{ rate_by_game_columns('k', 'n') }}
    from by_game
)

select * from final

with counted as (
    -- Counted per variant, prompt version (each its own experiment: never pooled), level, model and the level's role
    -- (int_reasoning_counts): one role a level, so one row each here.
    select
        variant,
        prompt_version,
        level,
        model,
        any_value(voter_role) as role,
        sum(n)::bigint as n,
        sum(k)::bigint as k,
        sum(k_random_fallback)::bigint as k_random_fallback,
        sum(n_games)::bigint as n_games
    from {{ ref('int_reasoning_counts') }}
    group by variant, prompt_version, level, model
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
        {{ rate_columns('k', 'n') }}
    from counted
)

select * from final

with opportunities as (
    -- Each prompt version is its own experiment (a prompt ablation plays one variant under two): never pooled.
    -- Each opportunity carries its game's variant and prompt version.
    select * replace (coalesce(prompt_version, '(none)') as prompt_version)
    from {{ ref('int_reasoning_opportunities') }}
),

counted as (
    select
        variant,
        prompt_version,
        level,
        model,
        any_value(voter_role) as role,
        count(*) as n,
        count(*) filter (where failed) as k,
        count(*) filter (where failed and random_fallback) as k_random_fallback,
        count(distinct game_id) as n_games
    from opportunities
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

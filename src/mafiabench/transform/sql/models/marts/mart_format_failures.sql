with decisions as (
    -- Each prompt version is its own experiment (a prompt ablation plays one variant under two): never pooled.
    select d.*, g.variant, coalesce(g.prompt_version, '(none)') as prompt_version
    from {{ ref('int_decisions') }} as d
    inner join {{ ref('stg_games') }} as g on g.game_id = d.game_id
),

counted as (
    select
        variant,
        prompt_version,
        coalesce(model, '(unknown)') as model,
        coalesce(role, '(unknown)') as role,
        action,
        count(*) as n,
        count(*) filter (where format_failure) as k
    from decisions
    group by all
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
        k * 1.0 / n as rate,
        {{ rate_columns('k', 'n') }}
    from counted
)

select * from final

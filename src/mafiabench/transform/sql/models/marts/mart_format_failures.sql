with counted as (
    -- The decisions counted per variant, prompt version (each its own experiment: never pooled), model, role and
    -- action (int_decision_counts).
    select * from {{ ref('int_decision_counts') }}
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

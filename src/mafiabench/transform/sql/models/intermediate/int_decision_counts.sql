{#- The agents' decisions and their format failures counted per variant, prompt version, model, role and action:
    what mart_format_failures reads, in a few rows; a summed model (macros/increment.sql). -#}
{{ config(materialized='summed', meta={'sum_keys': ['variant', 'prompt_version', 'model', 'role', 'action']}) }}

with decisions as (
    -- Each prompt version is its own experiment (a prompt ablation plays one variant under two): never pooled.
    select g.variant, coalesce(g.prompt_version, '(none)') as prompt_version, d.model, d.role, d.action,
        d.format_failure
    from {{ ref('int_decisions') }} as d
    inner join {{ ref('fct_games') }} as g on g.game_id = d.game_id
),

final as (
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
)

select * from final

{#- The agents' decisions and their format failures counted per variant, prompt version, model, role and action,
    and per what one game holds of them: m decisions of that key in a game, f of them format failures; `n_games` the
    games with that pattern, n and k their decisions and failures. What mart_format_failures reads, in a few rows: n
    and k summed over the patterns are the key's counts, and the patterns give the game-clustered sd (a model's
    failures within one game are not independent). A summed model (macros/increment.sql). -#}
{{ config(materialized='summed', meta={'sum_keys': ['variant', 'prompt_version', 'model', 'role', 'action', 'm',
                                                    'f']}) }}

with decisions as (
    -- Each prompt version is its own experiment (a prompt ablation plays one variant under two): never pooled.
    select g.variant, coalesce(g.prompt_version, '(none)') as prompt_version, d.game_id, d.model, d.role, d.action,
        d.format_failure
    from {{ ref('int_decisions') }} as d
    inner join {{ ref('fct_games') }} as g on g.game_id = d.game_id
),

per_game as (
    select
        variant,
        prompt_version,
        coalesce(model, '(unknown)') as model,
        coalesce(role, '(unknown)') as role,
        action,
        count(*) as m,
        count(*) filter (where format_failure) as f
    from decisions
    group by variant, prompt_version, game_id, model, role, action
),

final as (
    select variant, prompt_version, model, role, action, m, f, count(*) as n_games, sum(m) as n, sum(f) as k
    from per_game
    group by all
)

select * from final

{#- The agents' decisions and their format failures counted per variant, prompt version, model, role and action,
    and per what one game holds of them: m decisions of that key in a game, f of them format failures; `n_games` the
    games with that pattern, n and k their decisions and failures. What mart_format_failures reads, in a few rows: n
    and k summed over the patterns are the key's counts, and the patterns give the game-clustered sd (a model's
    failures within one game are not independent). A summed model (macros/increment.sql). -#}
{{ config(materialized='summed', meta={'sum_keys': ['variant', 'prompt_version', 'model', 'role', 'action', 'm',
                                                    'f'], 'sum_rows': 'n_games'}) }}

with per_game as (
    -- Each game's decisions of a model in a role and action. Grouped before the games' variant and prompt version are
    -- joined (one of a game's): the join then reads the groups, not the decisions (a million games' 9,000,000
    -- decisions in 6,000,000 groups: 2.2-2.6 s of query against 2.7-3.0 s joined first).
    select
        game_id,
        model,
        role,
        action,
        count(*) as m,
        count(*) filter (where format_failure) as f
    from {{ ref('int_decisions') }}
    group by game_id, model, role, action
),

final as (
    -- Each prompt version is its own experiment (a prompt ablation plays one variant under two): never pooled.
    select
        g.variant,
        coalesce(g.prompt_version, '(none)') as prompt_version,
        coalesce(p.model, '(unknown)') as model,
        coalesce(p.role, '(unknown)') as role,
        p.action,
        p.m,
        p.f,
        count(*) as n_games,
        sum(p.m) as n,
        sum(p.f) as k
    from per_game as p
    inner join {{ ref('fct_games') }} as g on g.game_id = p.game_id
    group by all
)

select * from final

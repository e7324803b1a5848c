{#- The reasoning tests (int_reasoning_opportunities) and their failures counted per variant, prompt version,
    level, model and role: what mart_reasoning_failures and mart_exceptional_games' failure rates read, in a few rows;
    a summed model (macros/increment.sql). A level is one role's test (1 the detective's, 2 the mafioso's), so a
    game is counted once per (level, model) here too. -#}
{{ config(materialized='summed', meta={'sum_keys': ['variant', 'prompt_version', 'level', 'model', 'voter_role']}) }}

with opportunities as (
    -- Each prompt version is its own experiment (a prompt ablation plays one variant under two): never pooled.
    select variant, coalesce(prompt_version, '(none)') as prompt_version, level, model, voter_role, game_id, failed,
        random_fallback
    from {{ ref('int_reasoning_opportunities') }}
),

final as (
    select
        variant,
        prompt_version,
        level,
        model,
        voter_role,
        count(*) as n,
        count(*) filter (where failed) as k,
        count(*) filter (where failed and random_fallback) as k_random_fallback,
        -- A game is counted by one build only (an increment's games are new), so these add up across builds too.
        count(distinct game_id) as n_games
    from opportunities
    group by variant, prompt_version, level, model, voter_role
)

select * from final

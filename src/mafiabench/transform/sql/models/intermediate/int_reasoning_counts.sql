{#- The reasoning tests (int_reasoning_opportunities) and their failures counted per variant, prompt version,
    level, model and role, and per what one game holds of them: m tests of that key in a game, f of them failed;
    `n_games` the games with that pattern, n, k and k_random_fallback their tests, failures and failures by a
    random fallback. What mart_reasoning_failures and mart_exceptional_games' failure rates read, in a few rows: the
    sums over the patterns are the key's counts, and the patterns give the game-clustered sd (a classic game's
    detective is tested at every vote it knows the mafioso, and one confusion lasts). A level is one role's test (1
    the detective's, 2 the mafioso's). A summed model (macros/increment.sql). -#}
{{ config(materialized='summed', meta={'sum_keys': ['variant', 'prompt_version', 'level', 'model', 'voter_role', 'm',
                                                    'f'], 'sum_rows': 'n_games'}) }}

with opportunities as (
    -- Each prompt version is its own experiment (a prompt ablation plays one variant under two): never pooled.
    select variant, coalesce(prompt_version, '(none)') as prompt_version, level, model, voter_role, game_id, failed,
        random_fallback
    from {{ ref('int_reasoning_opportunities') }}
),

per_game as (
    select
        variant,
        prompt_version,
        level,
        model,
        voter_role,
        count(*) as m,
        count(*) filter (where failed) as f,
        count(*) filter (where failed and random_fallback) as f_random_fallback
    from opportunities
    group by variant, prompt_version, level, model, voter_role, game_id
),

final as (
    select
        variant,
        prompt_version,
        level,
        model,
        voter_role,
        m,
        f,
        count(*) as n_games,
        sum(m) as n,
        sum(f) as k,
        sum(f_random_fallback) as k_random_fallback
    from per_game
    group by all
)

select * from final

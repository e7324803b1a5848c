{#- What dim_models counts of each model, in a few rows: its seats per provider, raw name, variant and role, and its
    games (each once); a summed model (macros/increment.sql): an increment adds its games' counts, and a game is in
    one build's count only, so the games' counts add up too. -#}
{{ config(materialized='summed', meta={'sum_keys': ['counted', 'model', 'provider', 'model_raw', 'variant', 'role'],
                                       'sum_rows': 'n'}) }}

with seats as (
    select 'seats' as counted, model, provider, model_raw, variant, role, count(*) as n
    from {{ ref('int_player_games') }}
    group by model, provider, model_raw, variant, role
),

games as (
    -- A model's games, each once (read apart from the seats' counts: DuckDB would buffer a shared read's 4M seats).
    select 'games' as counted, model, null as provider, null as model_raw, null as variant, null as role,
        count(distinct game_id) as n
    from {{ ref('int_player_games') }}
    group by model
),

final as (
    select * from seats
    union all
    select * from games
)

select * from final

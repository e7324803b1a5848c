{#- Which capability bars each game stands behind (a homogeneous game behind all three), so a bar on a capability
    page opens the list of its games. A view over int_capability_games. -#}
{{ config(materialized='view') }}

with capability_games as (
    select * from {{ ref('int_capability_games') }}
),

final as (
    select
        game_id,
        study,
        capability,
        background,
        target_model,
        capability_cell
    from capability_games
)

select * from final

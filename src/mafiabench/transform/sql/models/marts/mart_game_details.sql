{#- What a transcript page shows of a game beyond fct_games: the seed it was dealt with (to replay it) and the error
    a failed game recorded. A view over stg_games, for the games of the published build. -#}
{{ config(materialized='view') }}

with games as (
    select * from {{ ref('stg_games') }}
    where game_id in (select game_id from {{ ref('fct_games') }})
),

final as (
    select
        game_id,
        seed,
        error
    from games
)

select * from final

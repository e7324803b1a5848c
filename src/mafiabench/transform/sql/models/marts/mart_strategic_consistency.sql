with pairs as (
    select * from {{ ref('int_belief_consistency') }}
),

players as (
    select * from {{ ref('fct_player_games') }}
),

final as (
    select
        p.game_id,
        pl.study,
        p.player,
        pl.variant,
        pl.role,
        pl.team,
        pl.model,
        pl.won,
        count(*) as n_day_pairs,
        avg(p.jsd) as mean_jsd
    from pairs as p
    inner join players as pl on pl.game_id = p.game_id and pl.name = p.player
    group by p.game_id, pl.study, p.player, pl.variant, pl.role, pl.team, pl.model, pl.won
)

select * from final

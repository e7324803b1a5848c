-- grain: one row per (game, player) with at least two consecutive days of vote beliefs
-- purpose: strategic consistency: the player's mean JSD between consecutive days' vote distributions
-- (lower = more consistent), with its role, model and whether it won (the t-test compares winners and losers).
with pairs as (
    select * from int_belief_consistency
),

players as (
    select * from fct_player_games
),

final as (
    select
        p.game_id,
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
    group by p.game_id, p.player, pl.variant, pl.role, pl.team, pl.model, pl.won
)

select * from final

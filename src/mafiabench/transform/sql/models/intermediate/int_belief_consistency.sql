with dists as (
    select game_id, player, round, candidate, probability
    from {{ ref('stg_beliefs') }}
    where phase = 'day' and action = 'vote'
),

days as (
    select distinct game_id, player, round from dists
),

pairs as (
    select d.game_id, d.player, d.round as day
    from days as d
    inner join days as e on e.game_id = d.game_id and e.player = d.player and e.round = d.round + 1
),

candidates as (
    -- The union of both days' candidates; a candidate missing on one day has probability 0 there.
    select distinct p.game_id, p.player, p.day, x.candidate
    from pairs as p
    inner join dists as x
        on x.game_id = p.game_id and x.player = p.player and (x.round = p.day or x.round = p.day + 1)
),

valued as (
    select
        c.game_id,
        c.player,
        c.day,
        coalesce(a.probability, 0.0) as p,
        coalesce(b.probability, 0.0) as q
    from candidates as c
    left join dists as a
        on a.game_id = c.game_id and a.player = c.player and a.round = c.day and a.candidate = c.candidate
    left join dists as b
        on b.game_id = c.game_id and b.player = c.player and b.round = c.day + 1 and b.candidate = c.candidate
),

final as (
    select
        game_id,
        player,
        day,
        0.5 * sum(case when p > 0 then p * log2(p / ((p + q) / 2)) else 0 end)
            + 0.5 * sum(case when q > 0 then q * log2(q / ((p + q) / 2)) else 0 end) as jsd
    from valued
    group by game_id, player, day
)

select * from final

with players as (
    select * from {{ ref('fct_player_games') }}
),

beliefs as (
    select distinct game_id, seq, player, round
    from {{ ref('stg_beliefs') }}
    where phase = 'day' and action = 'vote'
),

observations as (
    select
        m.game_id,
        m.name as mafioso,
        b.player as villager,
        b.round as day,
        1.0 - coalesce(x.probability, 0.0) as not_suspected
    from players as m
    inner join {{ ref('int_player_games') }} as mo on mo.game_id = m.game_id and mo.name = m.name
    inner join beliefs as b on b.game_id = m.game_id
    inner join players as v on v.game_id = b.game_id and v.name = b.player and v.role in ('villager', 'bystander')
    left join {{ ref('stg_beliefs') }} as x on x.game_id = b.game_id and x.seq = b.seq and x.candidate = m.name
    where m.role = 'mafioso' and (mo.out_seq is null or b.seq < mo.out_seq)
),

final as (
    select
        o.game_id,
        o.mafioso,
        m.model,
        m.variant,
        m.won,
        count(*) as n_observations,
        count(distinct o.villager) as n_villagers,
        count(distinct o.day) as n_days,
        avg(o.not_suspected) as deception_score
    from observations as o
    inner join players as m on m.game_id = o.game_id and m.name = o.mafioso
    group by o.game_id, o.mafioso, m.model, m.variant, m.won
)

select * from final

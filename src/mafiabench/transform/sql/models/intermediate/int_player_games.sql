with players as (
    select * from {{ ref('stg_players') }}
),

games as (
    select game_id, variant, winner, is_scored from {{ ref('stg_games') }}
),

exits as (
    -- `death` marks a night kill, `elimination` a day vote; the first one is when the player stopped playing.
    select
        game_id,
        target as name,
        min(seq) as out_seq,
        arg_min(event_type, seq) as exit_type,
        arg_min(round, seq) as out_round
    from {{ ref('stg_events') }}
    where event_type in ('death', 'elimination') and target is not null
    group by game_id, target
),

final as (
    select
        p.game_id,
        p.seat,
        p.name,
        p.role,
        p.team,
        p.agent,
        p.provider,
        p.model,
        p.model_raw,
        g.variant,
        g.is_scored,
        x.out_seq,
        x.out_round,
        case
            when x.exit_type = 'death' then 'killed'
            when x.exit_type = 'elimination' then 'eliminated'
            else 'survived'
        end as fate,
        coalesce(p.team = g.winner, false) as won
    from players as p
    inner join games as g on g.game_id = p.game_id
    left join exits as x on x.game_id = p.game_id and x.name = p.name
)

select * from final

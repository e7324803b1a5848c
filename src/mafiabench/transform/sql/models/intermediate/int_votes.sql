with votes as (
    select
        game_id,
        seq,
        phase,
        round,
        actor as voter,
        target,
        format_failure,
        random_fallback,
        case when data_kind = 'night_proposal' then 'night_proposal' else 'day' end as vote_kind
    from {{ ref('stg_events') }}
    where event_type = 'vote' and flag is null
),

players as not materialized (
    -- Read twice (voter and target) rather than buffered once: DuckDB would otherwise keep all 4M seats of 1M games
    -- in memory for the second join, which costs more than scanning the stored table again.
    select game_id, name, role, team, model, out_seq from {{ ref('int_player_games') }}
),

final as (
    select
        v.game_id,
        v.seq,
        v.phase,
        v.round,
        v.vote_kind,
        v.voter,
        v.target,
        v.format_failure,
        v.random_fallback,
        pv.role as voter_role,
        pv.team as voter_team,
        pv.model as voter_model,
        pt.role as target_role,
        pt.team as target_team,
        pt.model as target_model,
        -- "Active at the time": seated, and not killed or eliminated by an earlier event.
        (pv.name is not null and (pv.out_seq is null or pv.out_seq > v.seq)) as voter_active,
        (pt.name is not null and (pt.out_seq is null or pt.out_seq > v.seq)) as target_active,
        (v.voter = v.target) as is_self_vote
    from votes as v
    left join players as pv on pv.game_id = v.game_id and pv.name = v.voter
    left join players as pt on pt.game_id = v.game_id and pt.name = v.target
)

select * from final

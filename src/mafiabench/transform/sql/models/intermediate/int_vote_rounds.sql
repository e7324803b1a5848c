with day_votes as (
    select * from {{ ref('int_votes') }} where vote_kind = 'day'
),

tallies as (
    select
        game_id,
        round,
        target,
        count(*) as n_votes,
        count(*) filter (where random_fallback) as n_fallback_votes
    from day_votes
    group by game_id, round, target
),

rounds as (
    select
        game_id,
        round,
        list(voter) as voters,
        count(*) as n_voters,
        count(distinct target) as n_targets,
        count(*) filter (where random_fallback) as n_fallback_votes
    from day_votes
    group by game_id, round
),

eliminations as (
    select game_id, round, seq, target as eliminated, tie_break
    from {{ ref('stg_events') }}
    where event_type = 'elimination' and phase = 'day'
),

others as (
    -- The best count among the players who were not eliminated (a tie shows as an equal count).
    select e.game_id, e.round, max(t.n_votes) as max_votes_for_others
    from eliminations as e
    inner join tallies as t on t.game_id = e.game_id and t.round = e.round and t.target <> e.eliminated
    group by e.game_id, e.round
),

players as (
    select game_id, name, role, team from {{ ref('int_player_games') }}
),

joined as (
    select
        e.game_id,
        e.round,
        e.seq,
        e.eliminated,
        p.role as eliminated_role,
        p.team as eliminated_team,
        e.tie_break,
        coalesce(list_contains(r.voters, e.eliminated), false) as eliminated_voted,
        r.n_voters,
        r.n_targets,
        r.n_fallback_votes,
        coalesce(t.n_votes, 0) as votes_for_eliminated,
        coalesce(t.n_fallback_votes, 0) as fallback_votes_for_eliminated,
        coalesce(o.max_votes_for_others, 0) as max_votes_for_others
    from eliminations as e
    left join rounds as r on r.game_id = e.game_id and r.round = e.round
    left join tallies as t on t.game_id = e.game_id and t.round = e.round and t.target = e.eliminated
    left join others as o on o.game_id = e.game_id and o.round = e.round
    left join players as p on p.game_id = e.game_id and p.name = e.eliminated
),

last_rounds as (
    -- A per-game maximum joined back: cheaper than a window partitioned by game (0.4 s of 3 s at a million games).
    select game_id, max(round) as last_round from joined group by game_id
),

final as (
    select
        j.*,
        -- Unanimous: every vote cast went to the eliminated player, its own vote included (so a Mini-Mafia arrest,
        -- where the arrested player may not vote for itself, is never unanimous: a 2-1 vote is a majority).
        (votes_for_eliminated > 1 and votes_for_eliminated = n_voters) as is_unanimous,
        (votes_for_eliminated > 1 and votes_for_eliminated = n_voters and eliminated_team = 'town')
            as is_unanimous_wrong,
        -- Without its random fallback votes the eliminated player would not have been the clear plurality.
        (fallback_votes_for_eliminated > 0
            and votes_for_eliminated - fallback_votes_for_eliminated <= max_votes_for_others) as fallback_decided,
        j.round = l.last_round as is_last_vote
    from joined as j
    inner join last_rounds as l using (game_id)
)

select * from final

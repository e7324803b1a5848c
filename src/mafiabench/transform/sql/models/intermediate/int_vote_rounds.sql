with day_votes as not materialized (
    -- Read twice (the tallies, and whether the eliminated player voted) rather than buffered once: scanning the
    -- stored votes again costs less than keeping 3M of them in memory (a million games: 5.1 -> 4.0 CPU s).
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
    -- A round's counts from its tallies (one row per target), not from its votes again: every vote is in one
    -- tally, so the sums are the counts. Its two best counts among named targets give the best count among the
    -- players who were not eliminated (below) without joining every tally to the elimination.
    select
        game_id,
        round,
        sum(n_votes)::bigint as n_voters,
        count(target) as n_targets,
        sum(n_fallback_votes)::bigint as n_fallback_votes,
        max(n_votes, 2) filter (where target is not null) as top_votes
    from tallies
    group by game_id, round
),

eliminations as (
    select game_id, round, seq, target as eliminated, tie_break
    from {{ ref('stg_events') }}
    where event_type = 'elimination' and phase = 'day'
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
        exists (
            select 1 from day_votes as v
            where v.game_id = e.game_id and v.round = e.round and v.voter = e.eliminated
        ) as eliminated_voted,
        r.n_voters,
        r.n_targets,
        r.n_fallback_votes,
        coalesce(t.n_votes, 0) as votes_for_eliminated,
        coalesce(t.n_fallback_votes, 0) as fallback_votes_for_eliminated,
        -- The best count among the players who were not eliminated (a tie shows as an equal count): the best
        -- count, unless it is the eliminated player's own, then the second best (equal to it in a tie).
        coalesce(case
            when e.eliminated is null then null
            when t.n_votes is null or r.top_votes[1] > t.n_votes then r.top_votes[1]
            else r.top_votes[2]
        end, 0) as max_votes_for_others
    from eliminations as e
    left join rounds as r on r.game_id = e.game_id and r.round = e.round
    left join tallies as t on t.game_id = e.game_id and t.round = e.round and t.target = e.eliminated
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

with games as (
    select * from {{ ref('stg_games') }}
),

events as (
    select
        game_id,
        count(*) as n_events,
        -- Exact duplicate detection, cheaply where a game's seqs lie in 0-63 (every Mini-Mafia game): each seq one
        -- bit of an integer, the bits set are the distinct seqs. Longer games are counted in `long_games`. (`& 63`:
        -- the shift is computed for every row, filtered or not, and a negative seq must not fail its cast.)
        bit_count(bit_or(1::ubigint << (seq & 63)::ubigint) filter (where seq between 0 and 63)) as n_distinct_low_seq,
        min(seq) as min_seq,
        max(seq) as max_seq,
        count(*) filter (where event_type = 'game_end') as n_game_end
    from {{ ref('stg_events') }}
    group by game_id
),

long_games as (
    -- Games with a seq outside 0-63: their distinct seqs from a list (several times cheaper than count(distinct)).
    select game_id, len(list_distinct(list(seq))) as n_distinct_seq
    from {{ ref('stg_events') }}
    where game_id in (select game_id from events where min_seq < 0 or max_seq > 63)
    group by game_id
),

game_ends as (
    -- Filtered first so that only game_end events have their data parsed.
    select game_id, any_value(end_winner) as end_winner
    from {{ ref('stg_events') }}
    where event_type = 'game_end'
    group by game_id
),

players as (
    select
        game_id,
        count(*) as n_seats,
        -- list_distinct drops nulls as count(distinct) does, at a fraction of its cost over millions of seats.
        len(list_distinct(list(name))) as n_distinct_names,
        count(seat) as n_known_seats,
        len(list_distinct(list(seat))) as n_distinct_seats,
        count(*) filter (where role = 'mafioso') as n_mafioso,
        count(*) filter (where role = 'detective') as n_detective,
        count(*) filter (where role = 'villager') as n_villager,
        count(*) filter (where model is null or trim(model) = '') as n_empty_models
    from {{ ref('stg_players') }}
    group by game_id
),

bad_votes as (
    select
        game_id,
        count(*) as n_invalid_votes,
        min(
            voter || '->' || coalesce(target, '?') || ' at seq ' || seq
            || case when not voter_active then ' (voter not active)' else '' end
            || case when not target_active then ' (target not active)' else '' end
            || case when is_self_vote then ' (self vote)' else '' end
        ) as first_invalid_vote
    from {{ ref('int_votes') }}
    where not voter_active or not target_active or is_self_vote
    group by game_id
),

final as (
    select
        g.game_id,
        g.variant,
        g.status,
        g.winner,
        g.valid,
        g.is_scored,
        coalesce(e.n_events, 0) as n_events,
        -- 0 when seq is exactly 0..n-1 without gaps or duplicates.
        case when e.n_events is null then 0
             else (e.n_events - coalesce(lg.n_distinct_seq, e.n_distinct_low_seq, 0))
                 + abs(e.min_seq) + abs(e.max_seq - (e.n_events - 1)) end
            as seq_defects,
        coalesce(e.n_game_end, 0) as n_game_end,
        ge.end_winner,
        -- A finished game has exactly one game_end, a winner, and the log's winner agrees with the outcome.
        coalesce(g.status <> 'finished' or (
            coalesce(e.n_game_end, 0) = 1 and g.winner in ('mafia', 'town') and coalesce(ge.end_winner, '') = g.winner
        ), false) as one_winner_ok,
        coalesce(p.n_seats, 0) as n_seats,
        coalesce(p.n_seats, 0) - coalesce(p.n_distinct_names, 0) as duplicate_names,
        -- Seats a source does not have (Mini-Mafia batches) are null, never duplicates.
        coalesce(p.n_known_seats, 0) - coalesce(p.n_distinct_seats, 0) as duplicate_seats,
        coalesce(p.n_empty_models, 0) as n_empty_models,
        -- Mini-Mafia composition: four seats, 1 mafioso, 1 detective, 2 villagers (other variants pass).
        coalesce(g.variant <> 'mini-mafia'
            or (p.n_seats = 4 and p.n_mafioso = 1 and p.n_detective = 1 and p.n_villager = 2), false) as composition_ok,
        coalesce(b.n_invalid_votes, 0) as n_invalid_votes,
        b.first_invalid_vote
    from games as g
    left join events as e on e.game_id = g.game_id
    left join long_games as lg on lg.game_id = g.game_id
    left join game_ends as ge on ge.game_id = g.game_id
    left join players as p on p.game_id = g.game_id
    left join bad_votes as b on b.game_id = g.game_id
)

select * from final

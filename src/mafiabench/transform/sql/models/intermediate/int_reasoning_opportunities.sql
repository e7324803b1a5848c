-- Its two inputs read four and three times are scanned again by each reader (`not materialized`): DuckDB would
-- otherwise buffer 3M votes and 4M seats of a million games, which costs more than the scans.
with votes as not materialized (
    select * from {{ ref('int_votes') }} where vote_kind = 'day' and voter_active
),

players as not materialized (
    select game_id, name, role, team, model, out_seq from {{ ref('int_player_games') }}
),

games as (
    select game_id, variant, mafioso_knows_detective, prompt_version from {{ ref('stg_games') }}
),

known_mafia as (
    -- What each detective learned by investigation: a mafioso's name, from the first seq it knew it.
    select game_id, actor as detective, target as mafioso, min(seq) as known_seq
    from {{ ref('stg_events') }}
    where event_type = 'investigate' and investigate_result = 'mafioso'
    group by game_id, actor, target
),

level1_known as (
    -- Per detective vote, the mafioso it knew first (voting any it knew is right): a one-column arg_min on the
    -- join's keys, then one join back to the vote, instead of a distinct on over every column (5x the CPU).
    select v.game_id, v.seq, arg_min(k.mafioso, k.known_seq) as should_vote
    from votes as v
    inner join known_mafia as k on k.game_id = v.game_id and k.detective = v.voter and k.known_seq < v.seq
    inner join players as m on m.game_id = k.game_id and m.name = k.mafioso
    where v.voter_role = 'detective' and (m.out_seq is null or m.out_seq > v.seq)
    group by v.game_id, v.seq
),

level1 as (
    -- One row per detective vote, even if it knew several mafiosos.
    select
        v.game_id,
        v.seq,
        v.round,
        1 as level,
        v.voter,
        v.voter_role,
        v.voter_model as model,
        v.target,
        k.should_vote,
        coalesce(v.target_team, 'town') <> 'mafia' as failed,
        v.random_fallback
    from votes as v
    inner join level1_known as k on k.game_id = v.game_id and k.seq = v.seq
),

detective_known as (
    -- When a mafioso can know the detective: it was named by the detective in public, or told (older protocol).
    select a.game_id, a.named as mafioso, a.speaker as detective, a.first_seq as known_seq
    from {{ ref('int_accusations') }} as a
    inner join players as d on d.game_id = a.game_id and d.name = a.speaker and d.role = 'detective'
    where a.named_role = 'mafioso'
    union all
    select e.game_id, e.visibility[8:] as mafioso, e.target as detective, e.seq as known_seq
    from {{ ref('stg_events') }} as e
    where e.event_type = 'info' and e.visibility like 'player:%' and json_extract_string(e.data_json, '$.detective') is not null
),

level2_known as (
    -- Per mafioso vote, the detective it knew of first (as level1_known).
    select v.game_id, v.seq, arg_min(k.detective, k.known_seq) as should_vote
    from votes as v
    inner join detective_known as k on k.game_id = v.game_id and k.mafioso = v.voter and k.known_seq < v.seq
    inner join players as d on d.game_id = k.game_id and d.name = k.detective
    where v.voter_role = 'mafioso' and (d.out_seq is null or d.out_seq > v.seq)
    group by v.game_id, v.seq
),

level2 as (
    select
        v.game_id,
        v.seq,
        v.round,
        2 as level,
        v.voter,
        v.voter_role,
        v.voter_model as model,
        v.target,
        k.should_vote,
        v.target <> k.should_vote as failed,
        v.random_fallback
    from votes as v
    inner join level2_known as k on k.game_id = v.game_id and k.seq = v.seq
),

final as (
    -- The game's prompt version too, which mart_reasoning_failures groups by: the mart then reads this table alone.
    select o.*, g.variant, g.prompt_version
    from (select * from level1 union all select * from level2) as o
    inner join games as g on g.game_id = o.game_id
)

select * from final

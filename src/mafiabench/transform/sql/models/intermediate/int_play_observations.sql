-- Facts of play our simulator never produces, one row per event (or game) that shows one, in valid games: in a
-- simulated game each is a defect the quality gate refuses; in an imported game a fact of the dataset (people do
-- kill a teammate), counted in mart_dataset_observations and never refused as corruption.
with games as (
    select * from {{ ref('stg_games') }} where valid
),

players as (
    select * from {{ ref('stg_players') }}
),

rules as (
    select * from (values
        ('mafia_killed_own', 'the mafia never kills one of its own (nor a mafioso himself) at night'),
        ('inactive_vote', 'votes only by active players for other active players'),
        ('mini_mafia_composition', 'mini-mafia games have four players: 1 mafioso, 1 detective, 2 villagers')
    ) as r (observation, rule)
),

mafia_kills as (
    select
        e.game_id,
        'mafia_killed_own' as observation,
        e.seq,
        e.actor,
        e.target,
        e.target || ' (' || p.role || ') killed at night' as detail
    from {{ ref('stg_events') }} as e
    inner join players as p on p.game_id = e.game_id and p.name = e.target
    where p.team = 'mafia'
        and (e.event_type = 'kill' or (e.event_type = 'death' and e.data_json like '%"night_kill"%'))
),

inactive_votes as (
    select
        game_id,
        'inactive_vote' as observation,
        seq,
        voter as actor,
        target,
        voter || '->' || coalesce(target, '?') || ' at seq ' || seq
        || case when not voter_active then ' (voter not active)' else '' end
        || case when not target_active then ' (target not active)' else '' end
        || case when is_self_vote then ' (self vote)' else '' end as detail
    from {{ ref('int_votes') }}
    where not voter_active or not target_active or is_self_vote
),

compositions as (
    select
        game_id,
        'mini_mafia_composition' as observation,
        null::integer as seq,
        null::varchar as actor,
        null::varchar as target,
        n_seats || ' seats' as detail
    from {{ ref('int_game_checks') }}
    where not composition_ok
),

observed as (
    select * from mafia_kills
    union all
    select * from inactive_votes
    union all
    select * from compositions
),

final as (
    select
        o.game_id,
        g.source,
        g.study,
        g.is_imported,
        o.observation,
        r.rule,
        o.seq,
        o.actor,
        o.target,
        o.detail
    from observed as o
    inner join games as g on g.game_id = o.game_id
    inner join rules as r on r.observation = o.observation
)

select * from final

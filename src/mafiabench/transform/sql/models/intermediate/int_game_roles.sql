with players as not materialized (
    -- Read again by `mixed` (a few games at most) rather than buffered: DuckDB would keep all 4M seats of a million
    -- games in memory for it (2.8 -> 2.5 CPU s).
    select game_id, name, role, model, fate, out_round from {{ ref('int_player_games') }}
),

seated as (
    -- One model per role is the rule (Mini-Mafia design cells): min and max find it, and show where a role had
    -- several models, without building a list per game (lists and count(distinct) cost several times more).
    select
        game_id,
        min(model) filter (where role = 'mafioso') as mafioso_min,
        max(model) filter (where role = 'mafioso') as mafioso_max,
        min(model) filter (where role = 'detective') as detective_min,
        max(model) filter (where role = 'detective') as detective_max,
        min(model) filter (where role in ('villager', 'bystander') and fate <> 'killed') as day_villager_min,
        max(model) filter (where role in ('villager', 'bystander') and fate <> 'killed') as day_villager_max,
        min(model) filter (where role in ('villager', 'bystander')) as villager_min,
        max(model) filter (where role in ('villager', 'bystander')) as villager_max,
        any_value(name) filter (where role = 'mafioso') as mafioso_name,
        any_value(name) filter (where role = 'detective') as detective_name,
        any_value(name) filter (where fate = 'killed' and out_round = 1) as night_victim,
        -- One distinct model in every seat (count(distinct model) = 1).
        coalesce(min(model) = max(model), false) as is_homogeneous,
        count(*) as n_seats
    from players
    group by game_id
),

mixed as (
    -- Games where a role had several models: their distinct models, sorted and joined with ' + '.
    select
        game_id,
        nullif(array_to_string(list_sort(list_distinct(list(model) filter (where role = 'mafioso'))), ' + '), '')
            as mafioso_model,
        nullif(array_to_string(list_sort(list_distinct(list(model) filter (where role = 'detective'))), ' + '), '')
            as detective_model,
        -- The villager that matters is the one who was still playing by day (the night victim never speaks).
        coalesce(
            nullif(array_to_string(list_sort(list_distinct(
                list(model) filter (where role in ('villager', 'bystander') and fate <> 'killed'))), ' + '), ''),
            nullif(array_to_string(list_sort(list_distinct(
                list(model) filter (where role in ('villager', 'bystander')))), ' + '), '')
        ) as villager_model
    from players
    where game_id in (
        select game_id from seated
        where mafioso_min <> mafioso_max or detective_min <> detective_max
            or day_villager_min <> day_villager_max or villager_min <> villager_max
    )
    group by game_id
),

final as (
    select
        s.game_id,
        -- A role's one model ('' counts as none, as in the lists), else the sorted list of its models.
        case when m.game_id is null then nullif(s.mafioso_min, '') else m.mafioso_model end as mafioso_model,
        case when m.game_id is null then nullif(s.detective_min, '') else m.detective_model end as detective_model,
        case when m.game_id is null then coalesce(nullif(s.day_villager_min, ''), nullif(s.villager_min, ''))
             else m.villager_model end as villager_model,
        s.mafioso_name,
        s.detective_name,
        s.night_victim,
        s.is_homogeneous,
        s.n_seats
    from seated as s
    left join mixed as m on m.game_id = s.game_id
)

select * from final

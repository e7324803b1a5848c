with players as (
    select * from {{ ref('int_player_games') }}
),

final as (
    select
        game_id,
        -- Distinct models of a role, sorted and joined with ' + ' (one name when the role has one model);
        -- list aggregates are much cheaper than string_agg(distinct ... order by ...).
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
        ) as villager_model,
        any_value(name) filter (where role = 'mafioso') as mafioso_name,
        any_value(name) filter (where role = 'detective') as detective_name,
        any_value(name) filter (where fate = 'killed' and out_round = 1) as night_victim,
        count(distinct model) = 1 as is_homogeneous,
        count(*) as n_seats
    from players
    group by game_id
)

select * from final

-- grain: one row per game
-- purpose: who played what: the model in each role (Mini-Mafia design cells), the night victim, homogeneity.
with players as (
    select * from int_player_games
),

final as (
    select
        game_id,
        string_agg(distinct model, ' + ' order by model) filter (where role = 'mafioso') as mafioso_model,
        string_agg(distinct model, ' + ' order by model) filter (where role = 'detective') as detective_model,
        -- The villager that matters is the one who was still playing by day (the night victim never speaks).
        coalesce(
            string_agg(distinct model, ' + ' order by model)
                filter (where role in ('villager', 'bystander') and fate <> 'killed'),
            string_agg(distinct model, ' + ' order by model) filter (where role in ('villager', 'bystander'))
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

with players as (
    select * from {{ ref('int_player_games') }}
),

final as (
    select
        model,
        string_agg(distinct provider, ', ' order by provider) as providers,
        string_agg(distinct model_raw, ', ' order by model_raw) as raw_names,
        count(distinct game_id) as n_games,
        count(*) as n_seats,
        count(*) filter (where role = 'mafioso') as n_as_mafioso,
        count(*) filter (where role = 'detective') as n_as_detective,
        count(*) filter (where role in ('villager', 'bystander')) as n_as_villager,
        string_agg(distinct variant, ', ' order by variant) as variants
    from players
    group by model
)

select * from final

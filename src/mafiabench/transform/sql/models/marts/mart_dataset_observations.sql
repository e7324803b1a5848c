-- What an imported dataset shows that our simulator never would (a teammate killed at night, a vote by an absent
-- player...): facts of the dataset, counted per rule for its page, not defects.
with observations as (
    select * from {{ ref('int_play_observations') }} where is_imported
),

datasets as (
    select source, study, count(*) as n_dataset_games
    from {{ ref('stg_games') }}
    where valid and is_imported
    group by source, study
),

counted as (
    select
        source,
        study,
        observation,
        any_value(rule) as rule,
        count(distinct game_id) as n_games,
        count(*) as n_rows,
        list_sort(list_distinct(list(game_id)))[1:5] as example_game_ids
    from observations
    group by source, study, observation
),

final as (
    select
        c.source as dataset,
        c.study,
        c.observation,
        c.rule,
        c.n_games,
        d.n_dataset_games,
        c.n_rows,
        c.example_game_ids
    from counted as c
    inner join datasets as d on d.source = c.source and d.study = c.study
)

select * from final

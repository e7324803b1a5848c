with seats as (
    -- The seats counted per model, provider, raw name, variant and role first (a few rows for a million games):
    -- the lists and role counts below read those, not every seat once per list.
    select model, provider, model_raw, variant, role, n
    from {{ ref('int_model_counts') }}
    where counted = 'seats'
),

games as (
    -- Each model's games, each once (the one count that needs the seats' games).
    select model, n as n_games
    from {{ ref('int_model_counts') }}
    where counted = 'games'
),

final as (
    select
        s.model,
        string_agg(distinct s.provider, ', ' order by s.provider) as providers,
        string_agg(distinct s.model_raw, ', ' order by s.model_raw) as raw_names,
        any_value(g.n_games) as n_games,
        sum(s.n)::bigint as n_seats,
        coalesce(sum(s.n) filter (where s.role = 'mafioso'), 0)::bigint as n_as_mafioso,
        coalesce(sum(s.n) filter (where s.role = 'detective'), 0)::bigint as n_as_detective,
        coalesce(sum(s.n) filter (where s.role in ('villager', 'bystander')), 0)::bigint as n_as_villager,
        string_agg(distinct s.variant, ', ' order by s.variant) as variants
    from seats as s
    -- A seat without a model is a model of its own (null), as in `group by model`.
    left join games as g on g.model is not distinct from s.model
    group by s.model
)

select * from final

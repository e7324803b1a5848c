-- Adaptive sample sizes: each experiment's cells as its latest run with a [stopping] rule left them. The interval
-- is the rule's (Clopper-Pearson at the per-look level, Bonferroni over the fixed looks): the one that stays honest
-- under optional stopping, unlike a plain interval of the same games.
with looks as (
    select * from {{ ref('stg_stopping_looks') }}
),

latest_run as (
    select experiment, run_id
    from looks
    qualify row_number() over (
        partition by experiment order by coalesce(finished_at, started_at) desc, run_id desc
    ) = 1
),

final as (
    select
        looks.experiment,
        looks.run_id,
        looks.cell,
        looks.rule_description,
        looks.rule_half_width,
        looks.rule_min_games,
        looks.rule_max_games,
        looks.rule_wave,
        looks.rule_confidence,
        looks.rule_looks,
        looks.rule_level_per_look,
        looks.games,
        looks.n,
        looks.k,
        case when looks.n > 0 then looks.k * 1.0 / looks.n end as mafia_win_rate,
        looks.lower,
        looks.upper,
        (looks.upper - looks.lower) / 2 as half_width,
        looks.state,
        looks.state <> 'continue' as stopped
    from looks
    inner join latest_run using (experiment, run_id)
)

select * from final

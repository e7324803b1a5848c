-- With [stopping] (adaptive sample sizes), each run's summary records the rule and where every cell stood at its
-- last look (mafiabench.study.stopping): unpacked here, one row per (run, cell).
with source as (
    select * from {{ source('mafiabench', 'raw_runs') }}
    where json_exists(summary_json, '$.stopping.cells')
),

looks as (
    select
        source.run_id,
        source.experiment,
        source.started_at,
        source.finished_at,
        source.summary_json,
        cell_look.key as cell,
        cell_look.value as look
    from source, json_each(source.summary_json, '$.stopping.cells') as cell_look
),

final as (
    select
        run_id,
        experiment,
        started_at,
        finished_at,
        cell,
        json_extract_string(summary_json, '$.stopping.description') as rule_description,
        cast(json_extract(summary_json, '$.stopping.rule.half_width') as double) as rule_half_width,
        cast(json_extract(summary_json, '$.stopping.rule.min_games') as integer) as rule_min_games,
        cast(json_extract(summary_json, '$.stopping.rule.max_games') as integer) as rule_max_games,
        cast(json_extract(summary_json, '$.stopping.rule.wave') as integer) as rule_wave,
        cast(json_extract(summary_json, '$.stopping.rule.confidence') as double) as rule_confidence,
        cast(json_extract(summary_json, '$.stopping.rule.looks') as integer) as rule_looks,
        cast(json_extract(summary_json, '$.stopping.rule.level_per_look') as double) as rule_level_per_look,
        cast(look ->> 'games' as integer) as games,
        cast(look ->> 'n' as integer) as n,
        cast(look ->> 'k' as integer) as k,
        cast(look ->> 'lower' as double) as lower,
        cast(look ->> 'upper' as double) as upper,
        look ->> 'state' as state
    from looks
)

select * from final

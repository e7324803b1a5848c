with source as (
    select * from {{ source('mafiabench', 'raw_runs') }}
),

final as (
    select
        run_id,
        experiment,
        orchestrator,
        status,
        started_at,
        finished_at,
        wall_s,
        games_planned,
        games_already_landed,
        games_loaded_from_raw,
        games_to_play,
        games_played,
        games_done,
        games_failed,
        games_not_started,
        budget_stopped,
        calls,
        failed_calls,
        format_failures,
        input_tokens,
        output_tokens,
        cached_tokens,
        cost_usd,
        unpriced_models,
        price_version,
        games_concurrency,
        calls_concurrency,
        shard_errors
    from source
)

select * from final

with runs as (
    select * from {{ ref('stg_runs') }}
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
        games_done,
        games_already_landed as games_skipped_already_landed,
        games_failed,
        games_not_started,
        games_played,
        case when wall_s > 0 then games_played / wall_s end as games_per_second,
        games_concurrency,
        calls_concurrency,
        calls,
        failed_calls,
        case when calls > 0 then failed_calls * 1.0 / calls end as failed_call_share,
        format_failures,
        input_tokens,
        output_tokens,
        cached_tokens,
        cost_usd,
        unpriced_models,
        price_version,
        budget_stopped,
        shard_errors
    from runs
)

select * from final

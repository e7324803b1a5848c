with source as (
    select *, false as replaced from {{ source('mafiabench', 'raw_model_calls') }}
    union all by name
    select * exclude (replaced_at, replaced_record_sha256), true as replaced from {{ source('mafiabench', 'raw_replaced_calls') }}
),

final as (
    select
        game_id,
        call_index,
        player,
        action,
        phase,
        round,
        provider,
        model,
        started_at,
        coalesce(latency_ms, 0.0) as latency_ms,
        coalesce(attempts, 1) as attempts,
        coalesce(input_tokens, 0) as input_tokens,
        coalesce(output_tokens, 0) as output_tokens,
        coalesce(cached_tokens, 0) as cached_tokens,
        error_class,
        finish_reason,
        coalesce(format_failure, false) as format_failure,
        coalesce(prompt_chars, 0) as prompt_chars,
        coalesce(prefix_reuse_chars, 0) as prefix_reuse_chars,
        -- A call failed for good when it produced no response; a retried success keeps its last error class.
        (response_text is null and error_class is not null) as failed,
        response_text,
        temperature,
        max_tokens,
        reasoning_effort,
        replaced
    from source
)

select * from final

with calls as (
    select * from {{ ref('fct_model_calls') }}
),

final as (
    select
        game_id,
        count(*) as n_calls,
        count(*) filter (where failed) as n_failed_calls,
        count(*) filter (where replaced) as n_replaced_calls,
        count(*) filter (where attempts > 1) as n_retried_calls,
        sum(attempts) as n_attempts,
        count(*) filter (where format_failure) as n_format_failures,
        sum(input_tokens) as input_tokens,
        sum(output_tokens) as output_tokens,
        sum(cached_tokens) as cached_tokens,
        sum(total_tokens) as total_tokens,
        sum(cost_usd) as cost_usd,
        bool_and(priced) as fully_priced,
        sum(latency_ms) as latency_ms_total,
        sum(prompt_chars) as prompt_chars,
        sum(prefix_reuse_chars) as prefix_reuse_chars,
        case when sum(prompt_chars) > 0 then sum(prefix_reuse_chars) * 1.0 / sum(prompt_chars) end
            as prefix_reuse_share
    from calls
    group by game_id
)

select * from final

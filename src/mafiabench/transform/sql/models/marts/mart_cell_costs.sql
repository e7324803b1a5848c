with calls as (
    select c.*, g.study, g.cell
    from {{ ref('fct_model_calls') }} as c
    inner join {{ ref('fct_games') }} as g on g.game_id = c.game_id
),

aggregated as (
    select
        study,
        cell,
        provider,
        model,
        count(distinct game_id) as n_games,
        count(*) as n_calls,
        count(*) filter (where failed) as n_failed_calls,
        count(*) filter (where replaced) as n_replaced_calls,
        count(*) filter (where attempts > 1) as n_retried_calls,
        count(*) filter (where error_class is not null) as n_calls_with_errors,
        sum(input_tokens) as input_tokens,
        sum(output_tokens) as output_tokens,
        sum(cached_tokens) as cached_tokens,
        avg(input_tokens) as input_tokens_per_call,
        avg(output_tokens) as output_tokens_per_call,
        sum(total_tokens) * 1.0 / count(distinct game_id) as tokens_per_game,
        sum(cost_usd) as cost_usd,
        sum(cost_usd) / count(distinct game_id) as cost_usd_per_game,
        bool_and(priced) as fully_priced,
        any_value(price_version) as price_version,
        -- Both quantiles from one sort of each group's latencies (two quantile_cont calls sort twice); `final`
        -- splits the pair into the two columns, in place.
        quantile_cont(latency_ms, [0.5, 0.95]) as latency_ms_p50,
        null::double as latency_ms_p95,
        case when sum(prompt_chars) > 0 then sum(prefix_reuse_chars) * 1.0 / sum(prompt_chars) end
            as prefix_reuse_share
    from calls
    group by study, cell, provider, model
),

final as (
    select * replace (latency_ms_p50[1] as latency_ms_p50, latency_ms_p50[2] as latency_ms_p95)
    from aggregated
)

select * from final

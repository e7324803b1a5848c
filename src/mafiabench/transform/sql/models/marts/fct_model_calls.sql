{#- A view, not a table: copying 9 calls a game into a new table was the build's largest write (11 CPU s at 1M
    games), and no dashboard or gate check reads it. The published view shows the calls of the games the published
    build has (fct_games), so a landing after it, or a build the gate refused, does not show through. -#}
{{ config(materialized='view') }}

with calls as (
    -- The prompt version and hash are the game's (one home: raw_games), carried to each call.
    select c.*, g.prompt_version, g.prompt_sha256
    from {{ ref('stg_model_calls') }} as c
    inner join {{ ref('fct_games') }} as g on g.game_id = c.game_id
),

prices as (
    -- A price row matches a call's model as written or as provider/model (equi-joins, not an OR join).
    select *, model as call_model from {{ source('mafiabench', 'ref_prices') }} where model <> '*'
    union all
    select *, provider || '/' || model as call_model from {{ source('mafiabench', 'ref_prices') }} where model <> '*'
),

wildcards as (
    select * from {{ source('mafiabench', 'ref_prices') }} where model = '*'
),

priced as (
    select
        c.*,
        -- An exact provider/model price wins over the provider's wildcard (fake and scripted cost 0).
        coalesce(exact.price_version, wild.price_version) as price_version,
        coalesce(exact.input_per_mtok, wild.input_per_mtok) as input_per_mtok,
        coalesce(exact.output_per_mtok, wild.output_per_mtok) as output_per_mtok,
        coalesce(exact.cached_per_mtok, wild.cached_per_mtok, exact.input_per_mtok, wild.input_per_mtok)
            as cached_per_mtok
    from calls as c
    left join prices as exact on exact.provider = c.provider and exact.call_model = c.model
    left join wildcards as wild on wild.provider = c.provider
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
        latency_ms,
        attempts,
        input_tokens,
        output_tokens,
        cached_tokens,
        input_tokens + output_tokens as total_tokens,
        error_class,
        finish_reason,
        format_failure,
        failed,
        replaced,
        prompt_chars,
        prefix_reuse_chars,
        temperature,
        max_tokens,
        reasoning_effort,
        prompt_version,
        prompt_sha256,
        price_version,
        (input_per_mtok is not null) as priced,
        -- input_tokens includes the cached part (both backends report the whole prompt).
        ((input_tokens - cached_tokens) * input_per_mtok + cached_tokens * cached_per_mtok
            + output_tokens * output_per_mtok) / 1e6 as cost_usd
    from priced
)

select * from final

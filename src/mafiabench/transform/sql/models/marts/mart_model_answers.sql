{#- What each model wrote, as it came back (before parsing), for the replays on the transcript pages: the reasoning
    a model gives after its message or vote, and the answers that broke the format. A view, like fct_model_calls:
    the text is never copied, and only the games of the published build show through. -#}
{{ config(materialized='view') }}

with calls as (
    select * from {{ ref('stg_model_calls') }}
    where not replaced
      and game_id in (select game_id from {{ ref('fct_games') }})
),

final as (
    select
        game_id,
        call_index,
        player,
        action,
        phase,
        round,
        provider || '/' || model as model,
        started_at,
        attempts,
        error_class,
        format_failure,
        failed,
        response_text
    from calls
)

select * from final

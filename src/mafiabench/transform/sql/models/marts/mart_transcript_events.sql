{#- The event log as the transcript pages show it (omniscient: private events included, marked by visibility), for
    the games of the published build. A view: the pages read it a chunk of games at a time, nothing is copied. -#}
{{ config(materialized='view') }}

with events as (
    select * from {{ ref('stg_events') }}
    where game_id in (select game_id from {{ ref('fct_games') }})
),

final as (
    select
        game_id,
        seq,
        phase,
        round,
        event_type,
        actor,
        target,
        text,
        visibility,
        format_failure,
        random_fallback,
        truncated,
        tie_break,
        data_json
    from events
)

select * from final

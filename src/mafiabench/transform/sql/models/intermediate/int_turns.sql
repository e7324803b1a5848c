-- A view: per-turn rows are read by ad hoc queries, not by the marts, which read the per-game counts of
-- int_game_turns (storing six million turns with their text cost more than every read of them in a build).
{{ config(materialized='view') }}

with turns as (
    select
        game_id,
        seq,
        round as day,
        coalesce(discussion_round, 1) as discussion_round,
        actor as speaker,
        event_type,
        text,
        trim(coalesce(text, '')) as trimmed,
        truncated,
        format_failure
    from {{ ref('stg_events') }}
    where {{ is_discussion_turn() }}
),

games as (
    select game_id, last_turn_seq from {{ ref('int_game_turns') }}
),

final as (
    select
        t.game_id,
        t.seq,
        t.day,
        t.discussion_round,
        t.speaker,
        t.event_type,
        t.text,
        t.truncated,
        t.format_failure,
        {{ turn_words('t.event_type', 't.trimmed') }} as words,
        -- The last turn of the last day with discussion (seq grows with days): int_game_turns' last turn, one row
        -- a game, rather than a window over every turn (DuckDB makes that window a second pass over the turns,
        -- which a reader not asking for the flag paid too).
        t.seq = g.last_turn_seq as is_last_turn
    from turns as t
    left join games as g on g.game_id is not distinct from t.game_id
)

select * from final

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
    where event_type in ('message', 'silence') and phase = 'day' and flag is null
),

final as (
    select
        game_id,
        seq,
        day,
        discussion_round,
        speaker,
        event_type,
        text,
        truncated,
        format_failure,
        -- Words as the pieces between single spaces: one more than the spaces, the count `string_split(x, ' ')`
        -- gives, without building a list per turn (a third of this model's CPU at a million games).
        case when event_type = 'message' then length(trimmed) - length(replace(trimmed, ' ', '')) + 1 else 0 end
            as words,
        -- The last turn of the last day with discussion: the "last speaker" of the final round (seq grows with
        -- days). A window, not a join, so that a query not asking for it does not compute it.
        seq = max(seq) over (partition by game_id) as is_last_turn
    from turns
)

select * from final

-- grain: one row per speaking turn (a public message or a silence)
-- purpose: discussion turns with word counts and which turn was the last of the game's final discussion.
with turns as (
    select
        game_id,
        seq,
        round as day,
        coalesce(discussion_round, 1) as discussion_round,
        actor as speaker,
        event_type,
        text,
        truncated,
        format_failure
    from stg_events
    where event_type in ('message', 'silence') and phase = 'day'
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
        case when event_type = 'message' then len(string_split(trim(coalesce(text, '')), ' ')) else 0 end as words,
        -- The last turn of the last day with discussion: the "last speaker" of the final round.
        row_number() over (partition by game_id order by day desc, seq desc) = 1 as is_last_turn
    from turns
)

select * from final

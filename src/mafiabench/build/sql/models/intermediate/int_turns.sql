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

last_turns as (
    -- The last turn of the last day with discussion: the "last speaker" of the final round (seq grows with days).
    select game_id, max(seq) as last_seq from turns group by game_id
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
        t.seq = l.last_seq as is_last_turn
    from turns as t
    inner join last_turns as l using (game_id)
)

select * from final

-- From the events, not from int_turns: that view's last-turn flag is a join DuckDB does not drop when unread (a
-- second pass over the day's events), and int_turns reads its last turn from here.
with turns as (
    select game_id, seq, actor as speaker, event_type, trim(coalesce(text, '')) as trimmed
    from {{ ref('stg_events') }}
    where {{ is_discussion_turn() }}
),

final as (
    select
        game_id,
        count(*) as n_turns,
        count(*) filter (where event_type = 'message') as n_messages,
        sum({{ turn_words('event_type', 'trimmed') }}) as n_words,
        -- The last turn of the last day with discussion (seq grows with days): its speaker spoke last.
        arg_max(speaker, seq) as last_speaker,
        max(seq) as last_turn_seq
    from turns
    group by game_id
)

select * from final

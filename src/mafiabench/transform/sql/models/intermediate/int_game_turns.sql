with turns as (
    select game_id, seq, speaker, event_type, words from {{ ref('int_turns') }}
),

final as (
    select
        game_id,
        count(*) as n_turns,
        count(*) filter (where event_type = 'message') as n_messages,
        sum(words) as n_words,
        -- The last turn of the last day with discussion (seq grows with days): its speaker spoke last.
        arg_max(speaker, seq) as last_speaker,
        max(seq) as last_turn_seq
    from turns
    group by game_id
)

select * from final

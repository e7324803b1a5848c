with messages as (
    select game_id, seq, actor as speaker, lower(text) as text
    from {{ ref('stg_events') }}
    where event_type = 'message' and text is not null and flag is null
),

players as (
    select game_id, name, role from {{ ref('int_player_games') }}
),

final as (
    -- A name mentioned in the message (case-insensitive substring): a cheap, transparent accusation proxy.
    select
        m.game_id,
        m.speaker,
        p.name as named,
        p.role as named_role,
        min(m.seq) as first_seq,
        count(*) as n_messages
    from messages as m
    inner join players as p
        on p.game_id = m.game_id and p.name <> m.speaker and contains(m.text, lower(p.name))
    group by m.game_id, m.speaker, p.name, p.role
)

select * from final

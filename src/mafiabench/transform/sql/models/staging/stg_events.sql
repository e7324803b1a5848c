with source as (
    select * from {{ source('mafiabench', 'raw_events') }}
),

parsed as (
    -- One parse of data_json per event; each field is null where the event type does not carry it.
    select
        *,
        from_json(data_json, '{
            "kind": "VARCHAR", "result": "VARCHAR", "scripted": "BOOLEAN", "discussion_round": "INTEGER",
            "role": "VARCHAR", "winner": "VARCHAR", "flag": "VARCHAR"
        }') as d
    from source
),

final as (
    select
        game_id,
        seq,
        phase,
        round,
        type as event_type,
        actor,
        target,
        text,
        visibility,
        coalesce(format_failure, false) as format_failure,
        coalesce(random_fallback, false) as random_fallback,
        coalesce(truncated, false) as truncated,
        coalesce(tie_break, false) as tie_break,
        data_json,
        d.kind as data_kind,
        d.result as investigate_result,
        coalesce(d.scripted, false) as is_scripted,
        d.discussion_round,
        d.role as revealed_role,
        d.winner as end_winner,
        -- An importer's quirk flag (a vote cast after the voter's elimination, a message from an eliminated
        -- player, a repeated phase change): the event stays in the log and no tally counts it.
        d.flag
    from parsed
)

select * from final

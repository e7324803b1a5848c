-- grain: one row per event of a landed game (raw_events: game_id, seq)
-- purpose: the event log with the type-specific fields of data_json that marts use pulled out as columns.
with source as (
    select * from raw_events
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
        json_extract_string(data_json, '$.kind') as data_kind,
        json_extract_string(data_json, '$.result') as investigate_result,
        coalesce(try_cast(json_extract_string(data_json, '$.scripted') as boolean), false) as is_scripted,
        try_cast(json_extract_string(data_json, '$.discussion_round') as integer) as discussion_round,
        json_extract_string(data_json, '$.role') as revealed_role,
        json_extract_string(data_json, '$.winner') as end_winner
    from source
)

select * from final

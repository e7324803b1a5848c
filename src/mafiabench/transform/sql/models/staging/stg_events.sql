{#- Each field of data_json is parsed only where the text can hold its key: `"<key>"` is in it, or a backslash (an
    escaped key). data_json is written by json.dumps, so a document without either has no such key and the field is
    null, as a parse would give; the field alone parses as the whole document's struct would give it. A reader of one
    field then parses the few events that carry it, not all of them (the flag: none of a million games' 21 million
    events; every message and silence was parsed for it before, 0.6 CPU s of int_decisions alone). -#}
{%- set fields = [
    ("kind", "VARCHAR"), ("result", "VARCHAR"), ("scripted", "BOOLEAN"), ("discussion_round", "INTEGER"),
    ("role", "VARCHAR"), ("winner", "VARCHAR"), ("flag", "VARCHAR"),
] -%}
with source as (
    select * from {{ source('mafiabench', 'raw_events') }}
),

parsed as (
    select
        *,
        {%- for key, type in fields %}
        case when contains(data_json, '"{{ key }}"') or contains(data_json, '\')
            then from_json(data_json, '{"{{ key }}": "{{ type }}"}').{{ key }} end as d_{{ key }}
        {{- "," if not loop.last }}
        {%- endfor %}
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
        d_kind as data_kind,
        d_result as investigate_result,
        coalesce(d_scripted, false) as is_scripted,
        d_discussion_round as discussion_round,
        d_role as revealed_role,
        d_winner as end_winner,
        -- An importer's quirk flag (a vote cast after the voter's elimination, a message from an eliminated
        -- player, a repeated phase change): the event stays in the log and no tally counts it.
        d_flag as flag
    from parsed
)

select * from final

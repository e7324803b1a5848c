with source as (
    select * from {{ source('mafiabench', 'raw_statement_labels') }}
),

final as (
    select
        game_id,
        seq,
        assessor,
        kind,
        call_index,
        is_deceptive,
        confidence,
        deception_type,
        suspicion_level,
        reasoning,
        chain_of_thought,
        coalesce(format_failure, false) as format_failure,
        parse_error
    from source
)

select * from final

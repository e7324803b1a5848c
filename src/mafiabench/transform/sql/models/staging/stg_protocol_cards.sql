with source as (
    select * from {{ source('mafiabench', 'raw_protocol_cards') }}
),

final as (
    select
        experiment,
        protocol,
        protocol_title,
        repository,
        reference_commit,
        position,
        aspect,
        aspect_group,
        label,
        reference_value,
        experiment_value,
        matches,
        source,
        note,
        recorded_at
    from source
)

select * from final

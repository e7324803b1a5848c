-- Each experiment's protocol card (mafiabench.protocols): every aspect of the reference protocol it names, the
-- reference's value and source beside the experiment's, whether they match, and the card's totals on every row.
with cards as (
    select * from {{ ref('stg_protocol_cards') }}
),

final as (
    select
        experiment as study,
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
        case when matches is null then 'noted' when matches then 'matches' else 'deviates' end as status,
        source,
        note,
        count(*) filter (where matches = false) over (partition by experiment) as deviations,
        count(*) filter (where matches) over (partition by experiment) as matching,
        count(*) filter (where matches is null) over (partition by experiment) as noted,
        recorded_at
    from cards
)

select * from final

with source as (
    select * from {{ source('mafiabench', 'raw_beliefs') }}
),

final as (
    select
        game_id,
        seq,
        player,
        phase,
        round,
        action,
        candidate,
        probability,
        coalesce(uniform_fallback, false) as uniform_fallback,
        mafia_probability
    from source
)

select * from final

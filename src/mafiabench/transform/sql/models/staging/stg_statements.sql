with source as (
    select * from {{ source('mafiabench', 'raw_statements') }}
),

final as (
    select
        game_id,
        seq,
        phase,
        round,
        speaker,
        speaker_role,
        speaker_team,
        text,
        coalesce(listeners, []::varchar[]) as listeners,
        n_claims,
        n_checkable_claims,
        n_false_claims,
        coalesce(false_claim, false) as false_claim,
        self_claim,
        self_claim_true,
        coalesce(accused, []::varchar[]) as accused,
        accusations_true,
        claims_json
    from source
)

select * from final

{#- Every statement label of the published games beside the statement and its truth: what the page lists under
    each figure and shows beside each message of a transcript. -#}
with labels as (
    select * from {{ ref('int_statement_labels') }}
),

statements as (
    select game_id, seq, text, self_claim, self_claim_true, accused, accusations_true, n_false_claims
    from {{ ref('stg_statements') }}
),

final as (
    select
        l.*,
        s.text,
        s.self_claim,
        s.self_claim_true,
        s.accused,
        s.accusations_true,
        s.n_false_claims
    from labels l
    join statements s using (game_id, seq)
    where l.game_id in (select game_id from {{ ref('fct_games') }})
)

select * from final

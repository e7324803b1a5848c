{#- One row per (statement, assessor): the label beside the truth the game gives and the speaker's own label, with
    the models and roles of speaker and assessor. Truths a label can be scored against: the speaker is on the mafia's
    side (`speaker_mafia`), the statement makes a checkable false claim (`false_claim`), and WOLF's: the speaker's
    own label (`self_deceptive`, null when the speaker gave none or it could not be read). -#}
with labels as (
    select * from {{ ref('stg_statement_labels') }}
),

statements as (
    select * from {{ ref('stg_statements') }}
),

players as (
    select * from {{ ref('stg_players') }}
),

games as (
    select game_id, study, experiment, cell, variant from {{ ref('stg_games') }}
),

own as (
    select game_id, seq, is_deceptive as self_deceptive, confidence as self_confidence
    from labels
    where kind = 'self'
),

final as (
    select
        l.game_id,
        g.study,
        g.experiment,
        g.cell,
        g.variant,
        l.seq,
        s.round,
        s.speaker,
        sp.model as speaker_model,
        s.speaker_role,
        s.speaker_team,
        l.assessor,
        ap.model as assessor_model,
        ap.role as assessor_role,
        ap.team as assessor_team,
        l.kind,
        l.call_index,
        l.is_deceptive,
        l.confidence,
        l.deception_type,
        l.suspicion_level,
        l.reasoning,
        l.format_failure,
        l.parse_error,
        s.speaker_team = 'mafia' as speaker_mafia,
        s.false_claim,
        o.self_deceptive,
        o.self_confidence
    from labels l
    join statements s using (game_id, seq)
    join games g using (game_id)
    left join players sp on sp.game_id = s.game_id and sp.name = s.speaker
    left join players ap on ap.game_id = l.game_id and ap.name = l.assessor
    left join own o on o.game_id = l.game_id and o.seq = l.seq
)

select * from final

{#- How often a model's statements are deceptive, by its own account and by its listeners', in each role: WOLF's
    "werewolves deceptive in 31% of their turns" is the self-labelled rate of the mafioso rows. Rates are over the
    labels with a readable verdict; the false-claim rate is the game's own measure of the same statements. -#}
with labels as (
    select * from {{ ref('mart_statement_labels') }}
),

statements as (
    select s.game_id, s.seq, s.false_claim, s.n_checkable_claims
    from {{ ref('stg_statements') }} s
    where s.game_id in (select game_id from {{ ref('fct_games') }})
),

spoken as (
    select distinct l.study, l.speaker_model, l.speaker_role, l.speaker_team, l.game_id, l.seq,
           st.false_claim, st.n_checkable_claims
    from labels l join statements st using (game_id, seq)
),

by_speaker as (
    select
        study,
        speaker_model,
        speaker_role,
        any_value(speaker_team) as speaker_team,
        count(*) as statements,
        count(*) filter (where n_checkable_claims > 0) as statements_with_claims,
        avg(false_claim::int) as false_claim_rate
    from spoken
    group by all
),

judged as (
    select
        study,
        speaker_model,
        speaker_role,
        count(*) filter (where kind = 'self' and is_deceptive is not null) as self_labels,
        avg(is_deceptive::int) filter (where kind = 'self') as self_deceptive_rate,
        avg(confidence) filter (where kind = 'self') as self_mean_confidence,
        count(*) filter (where kind = 'peer' and is_deceptive is not null) as peer_labels,
        avg(is_deceptive::int) filter (where kind = 'peer') as peer_judged_rate,
        avg(suspicion_level) filter (where kind = 'peer') as peer_mean_suspicion,
        count(*) filter (where format_failure) as unreadable_labels
    from labels
    group by all
),

final as (
    select
        b.study,
        b.speaker_model as model,
        b.speaker_role as role,
        b.speaker_team as team,
        b.statements,
        j.self_labels,
        j.self_deceptive_rate,
        j.self_mean_confidence,
        j.peer_labels,
        j.peer_judged_rate,
        j.peer_mean_suspicion,
        b.statements_with_claims,
        b.false_claim_rate,
        j.unreadable_labels
    from by_speaker b
    join judged j using (study, speaker_model, speaker_role)
)

select * from final

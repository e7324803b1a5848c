{#- One statement, three lenses, with the truth beside them: the speaker's own label, its listeners' labels, how the
    listeners' stated P(speaker is mafia) moved over the statement's day (where the prompt asks for that belief: the
    classic/v3 villagers' vote; from their last report before the statement, or the even prior n_mafia / (n - 1),
    to their first after it) and the transcript detector's answer for that day (the detections whose cut is the
    statement's day, and how many named the speaker). -#}
with statements as (
    select s.*, g.study, g.variant, g.n_players, g.n_mafia, p.model as speaker_model
    from {{ ref('stg_statements') }} s
    join {{ ref('stg_games') }} g using (game_id)
    left join {{ ref('stg_players') }} p on p.game_id = s.game_id and p.name = s.speaker
    where s.game_id in (select game_id from {{ ref('fct_games') }})
),

labels as (
    select * from {{ ref('mart_statement_labels') }}
),

own as (
    select game_id, seq, is_deceptive as self_deceptive, confidence as self_confidence,
           deception_type as self_deception_type, reasoning as self_reasoning
    from labels where kind = 'self'
),

peers as (
    select
        game_id,
        seq,
        count(*) as peer_labels,
        count(*) filter (where is_deceptive) as peers_deceptive,
        avg(is_deceptive::int) as peer_deceptive_share,
        avg(suspicion_level) as peer_mean_suspicion
    from labels where kind = 'peer'
    group by all
),

reports as (
    select game_id, seq, player, candidate, mafia_probability
    from {{ ref('stg_beliefs') }}
    where action = 'vote' and mafia_probability is not null
),

listened as (
    select s.game_id, s.seq, s.speaker, unnest(s.listeners) as listener, s.n_mafia, s.n_players
    from statements s
),

moves as (
    select
        l.game_id,
        l.seq,
        l.listener,
        coalesce(
            (select last(r.mafia_probability order by r.seq) from reports r
             where r.game_id = l.game_id and r.player = l.listener and r.candidate = l.speaker and r.seq < l.seq),
            l.n_mafia / (l.n_players - 1)
        ) as before,
        (select first(r.mafia_probability order by r.seq) from reports r
         where r.game_id = l.game_id and r.player = l.listener and r.candidate = l.speaker and r.seq > l.seq) as after
    from listened l
),

beliefs as (
    select game_id, seq, count(after) as listeners_reporting, avg(after - before) as belief_change
    from moves
    group by all
),

detections as (
    select game_id, cut, detector, predicted
    from {{ source('mafiabench', 'raw_detections') }}
),

detected as (
    select
        s.game_id,
        s.seq,
        count(d.detector) as detections,
        count(d.detector) filter (where list_contains(d.predicted, s.speaker)) as detections_naming_speaker
    from statements s
    left join detections d on d.game_id = s.game_id and d.cut = s.round
    group by all
),

final as (
    select
        s.study,
        s.variant,
        s.game_id,
        s.seq,
        s.round,
        s.speaker,
        s.speaker_model,
        s.speaker_role,
        s.speaker_team,
        s.text,
        s.false_claim,
        s.self_claim,
        s.self_claim_true,
        s.accused,
        s.accusations_true,
        o.self_deceptive,
        o.self_confidence,
        o.self_deception_type,
        o.self_reasoning,
        coalesce(p.peer_labels, 0) as peer_labels,
        coalesce(p.peers_deceptive, 0) as peers_deceptive,
        p.peer_deceptive_share,
        p.peer_mean_suspicion,
        coalesce(b.listeners_reporting, 0) as listeners_reporting_beliefs,
        b.belief_change,
        d.detections,
        d.detections_naming_speaker
    from statements s
    left join own o using (game_id, seq)
    left join peers p using (game_id, seq)
    left join beliefs b using (game_id, seq)
    left join detected d using (game_id, seq)
)

select * from final

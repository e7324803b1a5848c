-- grain: one row per landed game (raw_games.game_id)
-- purpose: landed games with the rule options marts group by pulled out of rules_json, and a `study` key.
with source as (
    select * from raw_games
),

rules as (
    select
        game_id,
        try_cast(json_extract_string(rules_json, '$.discussion_rounds') as integer) as discussion_rounds,
        json_extract_string(rules_json, '$.night') as night_mode,
        try_cast(json_extract_string(rules_json, '$.mafioso_knows_detective') as boolean) as mafioso_knows_detective,
        try_cast(json_extract_string(rules_json, '$.speaking') as boolean) as speaking,
        try_cast(json_extract_string(rules_json, '$.speaking_rounds') as integer) as speaking_rounds,
        json_extract_string(rules_json, '$.decision') as decision_mode,
        json_extract_string(rules_json, '$.sampling') as sampling,
        json_extract_string(rules_json, '$.memory') as memory,
        try_cast(json_extract_string(rules_json, '$.detective') as boolean) as has_detective_rule
    from source
),

final as (
    select
        s.game_id,
        s.variant,
        s.seed,
        s.experiment,
        s.cell,
        s.game_index,
        coalesce(s.capabilities, []::varchar[]) as capabilities,
        s.target_model,
        s.background,
        -- Games are compared within a study: an experiment, or for imports the source they came from.
        coalesce(s.experiment, 'source:' || coalesce(s.source, 'unknown')) as study,
        s.status,
        s.winner,
        s.outcome_reason,
        coalesce(s.tie_decided, false) as tie_decided,
        s.days,
        s.n_players,
        s.n_mafia,
        coalesce(s.valid, true) as valid,
        s.invalid_reason,
        s.error,
        s.prompt_version,
        s.prompt_sha256,
        s.package_version,
        s.git_commit,
        coalesce(s.source, 'unknown') as source,
        s.source_file,
        s.source_sha256,
        s.record_sha256,
        s.landed_at,
        r.discussion_rounds,
        r.night_mode,
        coalesce(r.mafioso_knows_detective, false) as mafioso_knows_detective,
        r.speaking,
        r.speaking_rounds,
        r.decision_mode,
        r.sampling,
        r.memory,
        -- No-communication setting: Mini-Mafia with 0 discussion rounds, classic without a speaking phase.
        case
            when s.variant = 'mini-mafia' then coalesce(r.discussion_rounds, 2) > 0
            when s.variant = 'classic' then coalesce(r.speaking, true) and coalesce(r.speaking_rounds, 1) > 0
            else true
        end as has_communication,
        -- A game counts towards win rates when it finished with a winner and is valid.
        (s.status = 'finished' and coalesce(s.valid, true) and s.winner in ('mafia', 'town')) as is_scored
    from source as s
    left join rules as r on r.game_id = s.game_id
)

select * from final

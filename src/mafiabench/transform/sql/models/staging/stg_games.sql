with source as (
    select * from {{ source('mafiabench', 'raw_games') }}
),

parsed as (
    -- One parse of rules_json per game (from_json), not one per option; a missing or mistyped option is null.
    select
        *,
        from_json(rules_json, '{
            "discussion_rounds": "INTEGER", "night": "VARCHAR", "mafioso_knows_detective": "BOOLEAN",
            "speaking": "BOOLEAN", "speaking_rounds": "INTEGER", "decision": "VARCHAR", "sampling": "VARCHAR",
            "memory": "VARCHAR"
        }') as opts
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
        -- An imported game's own batch in its source (Mini-Mafia batches); cells merge batches.
        s.batch_id,
        coalesce(s.capabilities, []::varchar[]) as capabilities,
        s.target_model,
        s.background,
        -- The background's models an importer inferred rather than read (the web game records a session label only).
        coalesce(s.background_inferred, false) as background_inferred,
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
        -- An importer landed it (its source names one): its facts of play are the dataset's, reported, never refused.
        coalesce(s.source, 'simulation') <> 'simulation' as is_imported,
        s.source_file,
        s.source_sha256,
        s.record_sha256,
        s.landed_at,
        s.opts.discussion_rounds,
        s.opts.night as night_mode,
        coalesce(s.opts.mafioso_knows_detective, false) as mafioso_knows_detective,
        s.opts.speaking,
        s.opts.speaking_rounds,
        s.opts.decision as decision_mode,
        s.opts.sampling,
        s.opts.memory,
        -- No-communication setting: Mini-Mafia with 0 discussion rounds, classic without a speaking phase.
        case
            when s.variant = 'mini-mafia' then coalesce(s.opts.discussion_rounds, 2) > 0
            when s.variant = 'classic' then coalesce(s.opts.speaking, true) and coalesce(s.opts.speaking_rounds, 1) > 0
            else true
        end as has_communication,
        -- A game counts towards win rates when it finished with a winner and is valid.
        (s.status = 'finished' and coalesce(s.valid, true) and s.winner in ('mafia', 'town')) as is_scored
    from parsed as s
)

select * from final

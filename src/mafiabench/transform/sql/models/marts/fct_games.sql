with games as (
    select * from {{ ref('stg_games') }}
),

roles as (
    select * from {{ ref('int_game_roles') }}
),

last_vote as (
    select * from {{ ref('int_vote_rounds') }} where is_last_vote
),

turns as (
    select game_id, n_turns, n_messages, n_words, last_speaker from {{ ref('int_game_turns') }}
),

failures as (
    select
        game_id,
        count(*) as n_decisions,
        count(*) filter (where format_failure) as n_format_failures
    from {{ ref('int_decisions') }}
    group by game_id
),

revealed as (
    -- The detective named the mafioso in public before the game ended.
    select distinct a.game_id
    from {{ ref('int_accusations') }} as a
    inner join {{ ref('int_player_games') }} as d on d.game_id = a.game_id and d.name = a.speaker and d.role = 'detective'
    where a.named_role = 'mafioso'
),

final as (
    select
        g.game_id,
        g.variant,
        g.study,
        g.experiment,
        -- The cell a game's outcome is compared within: the design cell, else its role-model composition.
        coalesce(g.cell, 'mafioso=' || coalesce(r.mafioso_model, '?') || ' | detective='
            || coalesce(r.detective_model, '-') || ' | villager=' || coalesce(r.villager_model, '?')) as cell,
        g.game_index,
        g.capabilities,
        g.target_model,
        g.background,
        g.background_inferred,
        g.source,
        g.prompt_version,
        g.status,
        g.valid,
        g.invalid_reason,
        g.is_scored,
        g.winner,
        g.winner = 'mafia' as mafia_won,
        g.winner = 'town' as town_won,
        g.tie_decided,
        coalesce(v.fallback_decided, false) as fallback_decided,
        g.outcome_reason,
        g.days,
        g.n_players,
        g.n_mafia,
        g.has_communication,
        g.discussion_rounds,
        g.night_mode,
        g.mafioso_knows_detective,
        g.speaking,
        g.sampling,
        g.memory,
        r.mafioso_model,
        r.detective_model,
        r.villager_model,
        r.is_homogeneous,
        r.mafioso_name,
        r.detective_name,
        r.night_victim,
        v.eliminated as last_eliminated,
        v.eliminated_role as last_eliminated_role,
        coalesce(v.is_unanimous, false) as last_vote_unanimous,
        coalesce(t.n_turns, 0) as n_turns,
        coalesce(t.n_messages, 0) as n_messages,
        coalesce(t.n_words, 0) as n_words,
        t.last_speaker,
        coalesce(f.n_decisions, 0) as n_decisions,
        coalesce(f.n_format_failures, 0) as n_format_failures,
        (rv.game_id is not null) as detective_revealed,
        g.prompt_sha256,
        g.package_version,
        g.git_commit,
        g.record_sha256,
        g.landed_at,
        {{ transcript_path('g.game_id') }} as transcript_path
    from games as g
    left join roles as r on r.game_id = g.game_id
    left join last_vote as v on v.game_id = g.game_id
    left join turns as t on t.game_id = g.game_id
    left join failures as f on f.game_id = g.game_id
    left join revealed as rv on rv.game_id = g.game_id
)

select * from final

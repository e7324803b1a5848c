-- grain: one row per (game, player)
-- purpose: each seat's role, model, name, seat, fate and win, with the game's settings, for per-player analyses.
with players as (
    select * from int_player_games
),

games as (
    select
        game_id, study, experiment, cell, has_communication, tie_decided, fallback_decided, last_speaker, status
    from fct_games
),

final as (
    select
        p.game_id,
        p.variant,
        g.study,
        g.experiment,
        g.cell,
        p.seat,
        p.name,
        p.role,
        p.team,
        p.agent,
        p.provider,
        p.model,
        p.model_raw,
        p.fate,
        p.is_scored,
        p.won,
        g.tie_decided,
        g.fallback_decided,
        g.has_communication,
        (g.last_speaker is not null and g.last_speaker = p.name) as spoke_last,
        (g.last_speaker is not null) as had_discussion
    from players as p
    inner join games as g on g.game_id = p.game_id
)

select * from final

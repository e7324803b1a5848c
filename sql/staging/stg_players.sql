-- grain: one row per seat of a landed game (raw_players: game_id, seat)
-- purpose: players with their role, team and model identity; `model` is the normalised name marts group by.
with source as (
    select * from raw_players
),

final as (
    select
        game_id,
        seat,
        name,
        role,
        coalesce(team, case when role = 'mafioso' then 'mafia' else 'town' end) as team,
        agent,
        provider,
        model,
        model_raw
    from source
)

select * from final

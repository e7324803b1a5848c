-- grain: one row per (belief event, candidate) (raw_beliefs: game_id, seq, candidate)
-- purpose: stored belief distributions (classic belief mode): the probability a player puts on each candidate.
with source as (
    select * from raw_beliefs
),

final as (
    select
        game_id,
        seq,
        player,
        phase,
        round,
        action,
        candidate,
        probability,
        coalesce(uniform_fallback, false) as uniform_fallback
    from source
)

select * from final

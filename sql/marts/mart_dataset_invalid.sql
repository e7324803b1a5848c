-- grain: one row per (source, invalid_reason)
-- purpose: why games were excluded as invalid (no votes cast, technical failure, no winner recorded, ...).
with games as (
    select * from fct_games where not valid
),

final as (
    select
        source,
        coalesce(invalid_reason, '(no reason given)') as invalid_reason,
        count(*) as games
    from games
    group by all
)

select * from final

with games as (
    select * from {{ ref('fct_games') }} where not valid
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

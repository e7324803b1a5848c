with source as (
    select * from {{ source('mafiabench', 'raw_players') }}
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
        model_raw,
        coalesce(model_inferred, false) as model_inferred
    from source
)

select * from final

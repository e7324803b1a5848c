with beliefs as (
    select distinct game_id, seq, player, phase, round, action, uniform_fallback
    from {{ ref('stg_beliefs') }}
),

calls as (
    -- the last call made for each (player, phase, round, action): a re-prompt replaces the first answer
    select *
    from {{ ref('stg_model_calls') }}
    -- Only games with belief answers: the window below then ranks their calls alone, not every call landed.
    where not replaced and game_id in (select game_id from beliefs)
    qualify row_number() over (
        partition by game_id, player, phase, round, action order by call_index desc
    ) = 1
),

joined as (
    select
        g.variant,
        coalesce(c.model, '(no model call)') as model,
        b.action,
        b.uniform_fallback,
        coalesce(c.finish_reason = 'length', false) as cut_by_cap
    from beliefs as b
    inner join {{ ref('stg_games') }} as g on g.game_id = b.game_id
    left join calls as c
        on c.game_id = b.game_id and c.player = b.player and c.phase = b.phase
        and c.round = b.round and c.action = b.action
),

final as (
    select
        variant,
        model,
        action,
        count(*) as n_belief_answers,
        count(*) filter (where uniform_fallback) as n_fallbacks,
        count(*) filter (where uniform_fallback and cut_by_cap) as n_cut_by_cap,
        count(*) filter (where uniform_fallback) * 1.0 / count(*) as fallback_rate,
        count(*) filter (where uniform_fallback and cut_by_cap) * 1.0 / count(*) as cut_by_cap_rate
    from joined
    group by variant, model, action
)

select * from final

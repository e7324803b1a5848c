with players as (
    select * from {{ ref('stg_players') }}
),

games as (
    select game_id, variant, winner, is_scored, prompt_version, prompt_sha256 from {{ ref('stg_games') }}
),

exits as (
    -- `death` marks a night kill, `elimination` a day vote; the first one is when the player stopped playing.
    select
        game_id,
        target as name,
        min(seq) as out_seq,
        arg_min(event_type, seq) as exit_type,
        arg_min(round, seq) as out_round
    from {{ ref('stg_events') }}
    where event_type in ('death', 'elimination') and target is not null
    group by game_id, target
),

seat_settings as (
    -- The settings the seat's model was called with in the game (typed at landing from each request), read off
    -- every call of that model in the game, so a seat that made no call (the night victim) still has them: one
    -- temperature and reasoning effort a model a game; token caps per kind of answer (messages, and the others:
    -- votes, night actions, beliefs, scheduling). A replayed game's replaced calls do not count.
    select
        game_id,
        provider || '/' || model as agent,  -- a call names its model without the provider, a seat with it
        any_value(temperature) as temperature,
        any_value(reasoning_effort) as reasoning_effort,
        max(max_tokens) filter (where action = 'speak') as max_tokens_message,
        max(max_tokens) filter (where action <> 'speak') as max_tokens_other
    from {{ ref('stg_model_calls') }}
    where not replaced
    group by game_id, provider || '/' || model
),

final as (
    select
        p.game_id,
        p.seat,
        p.name,
        p.role,
        p.team,
        p.agent,
        p.provider,
        p.model,
        p.model_raw,
        p.model_inferred,
        g.variant,
        g.is_scored,
        x.out_seq,
        x.out_round,
        case
            when x.exit_type = 'death' then 'killed'
            when x.exit_type = 'elimination' then 'eliminated'
            else 'survived'
        end as fate,
        coalesce(p.team = g.winner, false) as won,
        g.prompt_version,
        g.prompt_sha256,
        s.temperature,
        s.reasoning_effort,
        s.max_tokens_message,
        s.max_tokens_other,
        -- The settings in one readable key ('' for a seat without model calls: policies, imported games).
        concat_ws(
            ', ',
            'temperature ' || s.temperature,
            case when s.max_tokens_message is not null or s.max_tokens_other is not null then
                'max_tokens ' || coalesce(s.max_tokens_message::varchar, '-') || '/'
                || coalesce(s.max_tokens_other::varchar, '-') end,
            'reasoning_effort ' || s.reasoning_effort
        ) as model_settings
    from players as p
    inner join games as g on g.game_id = p.game_id
    left join exits as x on x.game_id = p.game_id and x.name = p.name
    left join seat_settings as s on s.game_id = p.game_id and s.agent = p.agent
)

select * from final

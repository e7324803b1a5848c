{#- The seats' join below is built on the seats (4M rows at a million games), not on the nine million decisions:
    DuckDB estimates the filtered decisions at a few hundred thousand rows and would build its hash table on them
    (a copy of a million games' build: 8.8 -> 7.1 CPU s). Its build-side choice is a global setting (no hint exists),
    switched off for this model's query only and back on after it; it changes no row. -#}
{{ config(
    pre_hook="set disabled_optimizers = 'build_side_probe_side'",
    post_hook="reset disabled_optimizers",
) }}

with events as (
    select e.*, g.variant, g.night_mode
    from {{ ref('stg_events') }} as e
    inner join {{ ref('stg_games') }} as g on g.game_id = e.game_id
),

decisions as (
    select
        game_id, seq, round, actor,
        case
            when event_type in ('message', 'silence') then 'message'
            when event_type = 'vote' and data_kind = 'night_proposal' then 'night'
            when event_type = 'vote' then 'vote'
            else 'night'
        end as action,
        format_failure,
        random_fallback
    from events
    where (event_type in ('message', 'silence', 'vote') and flag is null)
        -- Night choices the agents made: not the scripted Mini-Mafia night, not classic's derived kill.
        or (event_type = 'investigate' and not is_scripted)
        or (event_type = 'kill' and variant = 'mini-mafia' and night_mode = 'agents')
),

players as (
    select game_id, name, role, model from {{ ref('int_player_games') }}
),

final as (
    select d.game_id, d.seq, d.round, d.actor, p.role, p.model, d.action, d.format_failure, d.random_fallback
    from decisions as d
    left join players as p on p.game_id = d.game_id and p.name = d.actor
)

select * from final

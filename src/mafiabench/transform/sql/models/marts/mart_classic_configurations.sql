with games as (
    select
        *,
        coalesce(nullif(concat_ws('+',
            case when speaking = false then 'no_speaking' end,
            case when sampling = 'argmax' then 'argmax_voting' end,
            case when memory = 'current_phase' then 'limited_memory' end,
            case when memory = 'full' then 'full_memory' end
        ), ''), 'baseline') as configuration
    from {{ ref('fct_games') }}
    where variant = 'classic' and is_scored
),

deception as (
    select game_id, avg(deception_score) as deception_score from {{ ref('mart_deception_scores') }} group by game_id
),

consistency as (
    select game_id, avg(mean_jsd) as mean_jsd from {{ ref('mart_strategic_consistency') }} group by game_id
),

final as (
    select
        g.n_players,
        g.n_mafia,
        g.configuration,
        count(*) as n,
        count(*) filter (where g.mafia_won) as k,
        avg(case when g.mafia_won then 1.0 else 0.0 end) as mafia_win_rate,
        sqrt(avg(case when g.mafia_won then 1.0 else 0.0 end)
            * (1 - avg(case when g.mafia_won then 1.0 else 0.0 end)) / count(*)) as standard_error,
        {{ rate_columns('count(*) filter (where g.mafia_won)', 'count(*)') }},
        avg(case when g.winner = 'town' then 1.0 else 0.0 end) as town_win_rate,
        avg(d.deception_score) as mean_deception_score,
        avg(c.mean_jsd) as mean_consistency_jsd
    from games as g
    left join deception as d on d.game_id = g.game_id
    left join consistency as c on c.game_id = g.game_id
    group by g.n_players, g.n_mafia, g.configuration
)

select * from final

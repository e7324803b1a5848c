{%- set keys = ['study', 'model', 'prompt_version', 'n_players', 'n_mafia', 'configuration'] -%}
with games as (
    select * from {{ ref('mart_classic_games') }}
),

deception as (
    -- Per mafioso (the paper averages the agents' D_i), from P(mafia) where the prompt elicited it.
    select
        {% for k in keys %}g.{{ k }}, {% endfor %}
        avg(d.deception_score) as mean_deception_score,
        count(*) as n_mafiosos_scored
    from {{ ref('mart_deception_scores') }} as d
    inner join games as g on g.game_id = d.game_id
    group by all
),

consistency as (
    -- Per agent: each player's mean JSD between consecutive days' vote distributions.
    select
        {% for k in keys %}g.{{ k }}, {% endfor %}
        avg(c.mean_jsd) as mean_consistency_jsd
    from {{ ref('mart_strategic_consistency') }} as c
    inner join games as g on g.game_id = c.game_id
    group by all
),

counted as (
    select
        {% for k in keys %}{{ k }}, {% endfor %}
        any_value(mafia_ratio) as mafia_ratio,
        bool_and(is_main) as is_main,
        bool_and(is_main_arm) as is_main_arm,
        count(*) as n,
        count(*) filter (where mafia_won) as k,
        count(*) filter (where winner = 'town') as k_town
    from games
    group by all
),

final as (
    select
        {% for k in keys %}c.{{ k }}, {% endfor %}
        c.mafia_ratio,
        c.is_main,
        c.is_main_arm,
        c.n,
        c.k,
        c.k * 1.0 / c.n as mafia_win_rate,
        -- The binomial standard error sqrt(p(1 - p)/n); the paper's Table 1 errors are about half of it.
        sqrt((c.k * 1.0 / c.n) * (1 - c.k * 1.0 / c.n) / c.n) as standard_error,
        {{ rate_columns('c.k', 'c.n') }},
        c.k_town * 1.0 / c.n as town_win_rate,
        d.mean_deception_score,
        coalesce(d.n_mafiosos_scored, 0) as n_mafiosos_scored,
        s.mean_consistency_jsd
    from counted as c
    left join deception as d
        on {% for k in keys %}d.{{ k }} is not distinct from c.{{ k }}{% if not loop.last %} and {% endif %}{% endfor %}
    left join consistency as s
        on {% for k in keys %}s.{{ k }} is not distinct from c.{{ k }}{% if not loop.last %} and {% endif %}{% endfor %}
)

select * from final

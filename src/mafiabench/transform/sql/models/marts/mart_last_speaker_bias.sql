with players as (
    -- Only the players who took part in the final discussion (not the night victim, not anyone out before it),
    -- counted (int_player_outcome_counts). Each study is read on its own (a warehouse may hold the published
    -- Mini-Mafia study beside a new run).
    select * from {{ ref('int_player_outcome_counts') }} where had_discussion and active_in_final_discussion
),

counted as (
    -- Each role, and every role together ('all': the Mini-Mafia study's `aggregate` row).
    select
        study,
        variant,
        coalesce(role, 'all') as role,
        spoke_last,
        sum(players)::bigint as n,
        coalesce(sum(players) filter (where won), 0)::bigint as k,
        coalesce(sum(players) filter (where won and tie_decided), 0)::bigint as k_tie
    from players
    group by grouping sets ((study, variant, role, spoke_last), (study, variant, spoke_last))
),

totals as (
    -- The role's players whoever spoke last (the study's `total_*` columns).
    select study, variant, role, sum(n) as total_n, sum(k) as total_k
    from counted
    group by study, variant, role
),

stats as (
    select
        c.*,
        t.total_n,
        t.total_k,
        {{ rate_columns('k', 'n') }},
        {{ laplace_mean('t.total_k', 't.total_n') }} as total_laplace_mean,
        {{ beta_sd('t.total_k', 't.total_n') }} as total_beta_sd
    from counted as c
    inner join totals as t on t.study = c.study and t.variant = c.variant and t.role = c.role
),

final as (
    select
        s.study,
        s.variant,
        s.role,
        s.spoke_last,
        s.n,
        s.k,
        s.k_tie,
        s.k - s.k_tie as k_clean,
        s.laplace_mean,
        s.beta_sd,
        s.wilson_low,
        s.wilson_high,
        s.total_n,
        s.total_k,
        s.total_laplace_mean,
        s.total_beta_sd,
        case when s.spoke_last then s.laplace_mean - o.laplace_mean end as advantage,
        case when s.spoke_last then sqrt(s.beta_sd * s.beta_sd + o.beta_sd * o.beta_sd) end as advantage_sd,
        -- The published table's contrast (the reference's last_speaker_advantage.csv): the last speakers' rate minus
        -- the rate of every player of the role, last speakers included. Those are nested, not independent: in
        -- proportions p_last - p_all = (n_other / n_all) (p_last - p_other), so its sd is advantage_sd scaled so.
        case when s.spoke_last then s.laplace_mean - s.total_laplace_mean end as advantage_vs_all_games,
        case when s.spoke_last then coalesce(o.n, 0) * 1.0 / s.total_n
            * sqrt(s.beta_sd * s.beta_sd + coalesce(o.beta_sd * o.beta_sd, 0)) end as advantage_vs_all_games_sd
    from stats as s
    left join stats as o
        on o.study = s.study and o.variant = s.variant and o.role = s.role and o.spoke_last = not s.spoke_last
)

select * from final

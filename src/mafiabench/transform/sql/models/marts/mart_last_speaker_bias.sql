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

sums as (
    -- The game as the unit (int_last_speaker_game_patterns): per role, the sums over games of each game's counts
    -- and their products, each pattern weighted by its games.
    select
        study,
        variant,
        role,
        sum(games) as games,
        sum(games) filter (where m_last > 0) as last_games,
        sum(games) filter (where m_other > 0) as other_games,
        sum(games * m_last) as last_n,
        sum(games * k_last) as last_k,
        sum(games * k_last * k_last) as last_kk,
        sum(games * k_last * m_last) as last_km,
        sum(games * m_last * m_last) as last_mm,
        sum(games * m_other) as other_n,
        sum(games * k_other) as other_k,
        sum(games * k_other * k_other) as other_kk,
        sum(games * k_other * m_other) as other_km,
        sum(games * m_other * m_other) as other_mm,
        sum(games * k_last * k_other) as cross_kk,
        sum(games * k_last * m_other) as cross_km,
        sum(games * m_last * k_other) as cross_mk,
        sum(games * m_last * m_other) as cross_mm
    from {{ ref('int_last_speaker_game_patterns') }}
    group by study, variant, role
),

ratios as (
    -- Each group's rate as a ratio over games, p = k / n, for the sums of squared per-game residuals,
    -- sum_g (k_g - p m_g)^2 expanded; `cross` is sum_g of the two groups' residuals' product, `total` the residuals
    -- of the role's players whoever spoke last.
    select
        *,
        last_k / nullif(last_n, 0)::double as p_last,
        other_k / nullif(other_n, 0)::double as p_other,
        (last_k + other_k) / nullif(last_n + other_n, 0)::double as p_total
    from sums
),

residuals as (
    select
        *,
        greatest(last_kk - 2 * p_last * last_km + p_last * p_last * last_mm, 0) as s_last,
        greatest(other_kk - 2 * p_other * other_km + p_other * p_other * other_mm, 0) as s_other,
        cross_kk - p_other * cross_km - p_last * cross_mk + p_last * p_other * cross_mm as s_cross,
        greatest((last_kk + other_kk + 2 * cross_kk)
            - 2 * p_total * (last_km + other_km + cross_km + cross_mk)
            + p_total * p_total * (last_mm + other_mm + 2 * cross_mm), 0) as s_total
    from ratios
),

by_game as (
    -- Cluster-robust sds with the small-sample factor G / (G - 1), G the games holding the players compared (null
    -- with fewer than two): each group's rate, the role's rate whoever spoke last, and the difference of the two
    -- groups' rates (the two groups of one game are not independent: the cross term).
    select
        study,
        variant,
        role,
        games,
        last_games,
        other_games,
        case when last_games > 1 then sqrt(last_games / (last_games - 1.0) * s_last) / last_n end as last_sd,
        case when other_games > 1 then sqrt(other_games / (other_games - 1.0) * s_other) / other_n end as other_sd,
        case when games > 1 then sqrt(games / (games - 1.0) * s_total) / (last_n + other_n) end as total_sd,
        case when games > 1 and last_n > 0 and other_n > 0 then sqrt(greatest(games / (games - 1.0) * (
            s_last / (last_n * last_n) + s_other / (other_n * other_n) - 2 * s_cross / (last_n * other_n)), 0))
        end as advantage_sd
    from residuals
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
        case when s.spoke_last then g.last_games else g.other_games end as games,
        case when s.spoke_last then g.last_sd else g.other_sd end as sd_by_game,
        g.games as total_games,
        g.total_sd as total_sd_by_game,
        case when s.spoke_last then s.laplace_mean - o.laplace_mean end as advantage,
        case when s.spoke_last then sqrt(s.beta_sd * s.beta_sd + o.beta_sd * o.beta_sd) end as advantage_sd,
        -- The published table's contrast (the reference's last_speaker_advantage.csv): the last speakers' rate minus
        -- the rate of every player of the role, last speakers included. Those are nested, not independent: in
        -- proportions p_last - p_all = (n_other / n_all) (p_last - p_other), so its sd is advantage_sd scaled so.
        case when s.spoke_last then s.laplace_mean - s.total_laplace_mean end as advantage_vs_all_games,
        case when s.spoke_last then coalesce(o.n, 0) * 1.0 / s.total_n
            * sqrt(s.beta_sd * s.beta_sd + coalesce(o.beta_sd * o.beta_sd, 0)) end as advantage_vs_all_games_sd,
        -- The same two contrasts' sds with the game as the unit: a game can hold several players of a role, who
        -- share their team's outcome (classic and asynchronous games' villagers), or players of both groups.
        case when s.spoke_last then g.advantage_sd end as advantage_sd_by_game,
        case when s.spoke_last then
            case when coalesce(o.n, 0) = 0 then 0 else o.n * 1.0 / s.total_n * g.advantage_sd end
        end as advantage_vs_all_games_sd_by_game
    from stats as s
    inner join by_game as g on g.study = s.study and g.variant = s.variant and g.role = s.role
    left join stats as o
        on o.study = s.study and o.variant = s.variant and o.role = s.role and o.spoke_last = not s.spoke_last
)

select * from final

with players as (
    -- Only the players who took part in the final discussion (not the night victim, not anyone out before it).
    select * from {{ ref('fct_player_games') }} where is_scored and had_discussion and active_in_final_discussion
),

counted as (
    select
        variant,
        role,
        spoke_last,
        count(*) as n,
        count(*) filter (where won) as k,
        count(*) filter (where won and tie_decided) as k_tie
    from players
    group by variant, role, spoke_last
),

stats as (
    select
        *,
        {{ rate_columns('k', 'n') }}
    from counted
),

final as (
    select
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
        case when s.spoke_last then s.laplace_mean - o.laplace_mean end as advantage,
        case when s.spoke_last then sqrt(s.beta_sd * s.beta_sd + o.beta_sd * o.beta_sd) end as advantage_sd
    from stats as s
    left join stats as o on o.variant = s.variant and o.role = s.role and o.spoke_last = not s.spoke_last
)

select * from final

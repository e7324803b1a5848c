{#- The last-speaker rows with the game as the unit (mart_last_speaker_bias): per (study, variant, role), sums over
    games of each game's counts of the role's players in the final discussion, who did (m_last, k_last of them won)
    and did not (m_other, k_other) speak last, and of their products. A game's players of a role share their team's
    outcome, so in classic and asynchronous games, where a final discussion holds several villagers, they are not
    independent; the cluster-robust variance of a ratio over games, G / (G - 1) * sum_g (k_g - p m_g)^2 / N^2, and
    of a difference of two such ratios, expand into these sums. A summed model (macros/increment.sql): an increment
    that adds games adds its games' sums. -#}
{{ config(materialized='summed', meta={'sum_keys': ['study', 'variant', 'role']}) }}

with players as (
    select study, variant, game_id, role, spoke_last, won
    from {{ ref('fct_player_games') }}
    where is_scored and had_discussion and active_in_final_discussion
),

per_role as (
    -- A game's study and variant are its own: grouped by game and role alone (at a million games a third cheaper
    -- than with them in the key).
    select
        game_id,
        role,
        any_value(study) as study,
        any_value(variant) as variant,
        count(*) filter (where spoke_last) as m_last,
        count(*) filter (where spoke_last and won) as k_last,
        count(*) filter (where not spoke_last) as m_other,
        count(*) filter (where not spoke_last and won) as k_other
    from players
    group by game_id, role
),

per_game as (
    -- Each role, and every role together ('all', as mart_last_speaker_bias).
    select study, variant, role, m_last, k_last, m_other, k_other from per_role
    union all
    select any_value(study), any_value(variant), 'all', sum(m_last), sum(k_last), sum(m_other), sum(k_other)
    from per_role
    group by game_id
),

final as (
    select
        study,
        variant,
        role,
        count(*) as games,
        count(*) filter (where m_last > 0) as last_games,
        sum(m_last)::hugeint as last_n,
        sum(k_last)::hugeint as last_k,
        sum(k_last * k_last)::hugeint as last_kk,
        sum(k_last * m_last)::hugeint as last_km,
        sum(m_last * m_last)::hugeint as last_mm,
        count(*) filter (where m_other > 0) as other_games,
        sum(m_other)::hugeint as other_n,
        sum(k_other)::hugeint as other_k,
        sum(k_other * k_other)::hugeint as other_kk,
        sum(k_other * m_other)::hugeint as other_km,
        sum(m_other * m_other)::hugeint as other_mm,
        sum(k_last * k_other)::hugeint as cross_kk,
        sum(k_last * m_other)::hugeint as cross_km,
        sum(m_last * k_other)::hugeint as cross_mk,
        sum(m_last * m_other)::hugeint as cross_mm
    from per_game
    group by study, variant, role
)

select * from final

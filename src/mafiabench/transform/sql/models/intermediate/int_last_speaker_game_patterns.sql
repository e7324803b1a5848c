{#- The last-speaker rows with the game as the unit (mart_last_speaker_bias): games counted by what each holds of a
    role's players in its final discussion, per study, variant and role (`all`: every role together): m_last of them
    spoke last (k_last of those won), m_other did not (k_other won). A game's players of a role share their team's
    outcome, so in classic and asynchronous games, where a final discussion holds several villagers, they are not
    independent; the cluster-robust variances the mart computes are sums over games of these counts' products, which
    a few patterns give (Mini-Mafia's million games hold 16). A summed model (macros/increment.sql): an increment that
    adds games adds its games' counts. -#}
{{ config(materialized='summed', meta={'sum_keys': ['study', 'variant', 'role', 'm_last', 'k_last', 'm_other',
                                                    'k_other'], 'sum_rows': 'games'}) }}

with players as (
    select study, variant, game_id, role, spoke_last, won
    from {{ ref('fct_player_games') }}
    where is_scored and had_discussion and active_in_final_discussion
),

per_game as (
    -- Each role's players of a game, and every role's ('all', as mart_last_speaker_bias).
    select
        study,
        variant,
        coalesce(role, 'all') as role,
        count(*) filter (where spoke_last) as m_last,
        count(*) filter (where spoke_last and won) as k_last,
        count(*) filter (where not spoke_last) as m_other,
        count(*) filter (where not spoke_last and won) as k_other
    from players
    group by grouping sets ((study, variant, game_id, role), (study, variant, game_id))
),

final as (
    select study, variant, role, m_last, k_last, m_other, k_other, count(*) as games
    from per_game
    group by study, variant, role, m_last, k_last, m_other, k_other
)

select * from final

{#- The scored games' players counted by everything the bias marts read of them (mart_name_seat_bias,
    mart_last_speaker_bias): a few hundred rows for a million games, one scan of the players for both marts; a summed
    model (macros/increment.sql). -#}
{%- set keys = ['study', 'variant', 'has_communication', 'name', 'seat', 'role', 'won', 'tie_decided', 'played_a_day',
                'had_discussion', 'active_in_final_discussion', 'spoke_last'] %}
{{ config(materialized='summed', meta={'sum_keys': keys, 'sum_rows': 'players'}) }}

with players as (
    select {{ keys | join(', ') }} from {{ ref('fct_player_games') }} where is_scored
),

final as (
    select {{ keys | join(', ') }}, count(*) as players
    from players
    group by {{ keys | join(', ') }}
)

select * from final

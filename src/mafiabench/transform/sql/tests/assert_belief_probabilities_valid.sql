-- rule: belief probabilities lie in [0, 1] and each stored distribution sums to 1
with sums as (
    select game_id, seq, player, sum(probability) as total, min(probability) as low, max(probability) as high,
        count(*) filter (where probability is null) as n_null
    from {{ ref('stg_beliefs') }}
    group by game_id, seq, player
)

select *
from sums
where n_null > 0 or low < 0 or high > 1 or abs(total - 1.0) > 1e-6

-- rule: each game's event seq runs 0..n-1 with no gap and no duplicate
select game_id, n_events, seq_defects
from {{ ref('int_game_checks') }}
where seq_defects <> 0

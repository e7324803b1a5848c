-- rule: a finished valid game has exactly one game_end event and one winner (mafia or town), agreeing with the log
select game_id, status, winner, n_game_end, end_winner
from {{ ref('int_game_checks') }}
where valid and not one_winner_ok

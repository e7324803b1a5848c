-- rule: a valid Mini-Mafia game seats four players: one mafioso, one detective, two villagers; every game's
-- names and seats are distinct
select game_id, n_seats, duplicate_names, duplicate_seats
from {{ ref('int_game_checks') }}
where (valid and not composition_ok) or duplicate_names > 0 or duplicate_seats > 0

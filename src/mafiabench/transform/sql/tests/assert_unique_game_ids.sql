-- rule: a game id is landed once
select game_id, count(*) as n_rows
from {{ source('mafiabench', 'raw_games') }}
group by game_id
having count(*) > 1

-- rule: every seat names the model (or policy) that played it
select game_id, seat, name, model
from {{ ref('stg_players') }}
where model is null or trim(model) = ''

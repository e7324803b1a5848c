-- rule: every vote of a valid game is cast by a player active at that moment, for another active player
select v.game_id, v.seq, v.vote_kind, v.voter, v.target, v.voter_active, v.target_active, v.is_self_vote
from {{ ref('int_votes') }} as v
inner join {{ ref('stg_games') }} as g on g.game_id = v.game_id
where g.valid and (not v.voter_active or not v.target_active or v.is_self_vote)

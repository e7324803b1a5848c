-- rule: every vote is cast by a player active at that moment, for another player active at that moment
select game_id, seq, vote_kind, voter, target, voter_active, target_active, is_self_vote
from int_votes
where not voter_active or not target_active or is_self_vote

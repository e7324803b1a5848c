{#- The patterns of play mart_exceptional_games flags where they are rare in a study, each found in one scored game:
    a per-game model (its rows for a game read that game's rows only), so an increment finds them in its own games
    and the mart counts them over the study from this table. -#}
with games as (
    select game_id, study, variant, winner, mafia_won, detective_revealed, mafioso_name
    from {{ ref('fct_games') }}
    where is_scored
),

final as (
    select game_id, study, variant, 'detective_revealed_town_lost' as rule,
        'the detective named the mafioso ' || coalesce(mafioso_name, '') || ' in public and the town still lost'
            as reason
    from games where detective_revealed and mafia_won
    union all
    select v.game_id, g.study, g.variant, 'unanimous_wrong_vote',
        'every vote cast on day ' || v.round || ' (' || v.n_voters || ') went to ' || v.eliminated || ', a '
            || coalesce(v.eliminated_role, '?')
    from {{ ref('int_vote_rounds') }} as v
    inner join games as g on g.game_id = v.game_id
    where v.is_unanimous_wrong
    union all
    select v.game_id, g.study, g.variant, 'fallback_decided',
        'a random fallback vote (after a format failure) decided the arrest of ' || v.eliminated
            || ' and the game went to ' || g.winner
    from {{ ref('int_vote_rounds') }} as v
    inner join games as g on g.game_id = v.game_id
    where v.is_last_vote and v.fallback_decided
    union all
    select r.game_id, g.study, g.variant, 'vote_reversal',
        string_agg(r.voter || ' voted ' || r.first_target || ' on day ' || r.day || ' then ' || r.second_target,
            '; ' order by r.voter)
    from (
        -- The same voter switched from a still-active target to another on the next day (classic/async).
        select a.game_id, a.voter, a.round as day, a.target as first_target, b.target as second_target
        from {{ ref('int_votes') }} as a
        inner join {{ ref('int_votes') }} as b
            on b.game_id = a.game_id and b.voter = a.voter and b.round = a.round + 1
            and a.vote_kind = 'day' and b.vote_kind = 'day'
        inner join {{ ref('int_player_games') }} as t on t.game_id = a.game_id and t.name = a.target
        where b.target <> a.target and (t.out_seq is null or t.out_seq > b.seq)
    ) as r
    inner join games as g on g.game_id = r.game_id
    group by r.game_id, g.study, g.variant
)

select * from final

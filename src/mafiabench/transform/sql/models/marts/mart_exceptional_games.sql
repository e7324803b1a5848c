with games as (
    -- Read by several parts below, so DuckDB keeps it: only the columns they read (a million games' every column
    -- cost most of the mart).
    select game_id, study, variant, cell, winner, mafia_won, detective_revealed, mafioso_name, transcript_path
    from {{ ref('fct_games') }}
    where is_scored
),

cell_counts as (
    select study, variant, cell, count(*) as n, count(*) filter (where mafia_won) as k_mafia
    from games
    group by study, variant, cell
),

upset_outcomes as (
    -- Probability of an outcome under its cell's Laplace rate with the game itself left out:
    -- (k_outcome - 1 + 1) / (n - 1 + 2); the same for every game of the cell with that outcome, so it is worked out
    -- per cell and outcome, and only the rare ones are joined to their games.
    select * from (
        select study, variant, cell, n, outcome_mafia_won,
            (case when outcome_mafia_won then k_mafia else n - k_mafia end) as k_outcome,
            (case when outcome_mafia_won then k_mafia else n - k_mafia end) * 1.0 / (n + 1) as p
        from cell_counts
        cross join (values (true), (false)) as o (outcome_mafia_won)
    )
    where p <= cast({{ var('upset_threshold') }} as double)
),

upsets as (
    select
        g.game_id,
        'upset' as rule,
        c.p,
        g.winner || ' won, which the other ' || (c.n - 1) || ' games of this cell put at '
            || round(100.0 * c.k_outcome / (c.n + 1), 1) || '%' as reason
    from games as g
    inner join upset_outcomes as c
        on c.study = g.study and c.variant = g.variant and c.cell = g.cell and c.outcome_mafia_won = g.mafia_won
),

study_sizes as (
    select study, variant, count(*) as n from games group by study, variant
),

patterns as (
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
),

pattern_rates as (
    -- A pattern's surprise is how rare it is among the study's scored games of the variant.
    select p.*, count(*) over (partition by p.study, p.variant, p.rule) * 1.0 / s.n as p
    from patterns as p
    inner join study_sizes as s on s.study = p.study and s.variant = p.variant
),

model_failures as (
    select
        model,
        level,
        count(*) as n,
        count(*) filter (where failed) as k
    from {{ ref('int_reasoning_opportunities') }}
    group by model, level
),

rare_failures as (
    -- A Level-1/2 failure by a model whose failure rate, this game left out, is at most the threshold.
    select
        o.game_id,
        'rare_level' || o.level || '_failure' as rule,
        (m.k * 1.0) / (m.n + 1) as p,
        o.voter || ' (' || o.model || ', ' || o.voter_role || ') voted ' || o.target || ' instead of '
            || o.should_vote || '; this model fails Level ' || o.level || ' in ' || (m.k - 1) || ' of its other '
            || (m.n - 1) || ' chances' as reason
    from {{ ref('int_reasoning_opportunities') }} as o
    inner join model_failures as m on m.model = o.model and m.level = o.level
    inner join games as g on g.game_id = o.game_id
    where o.failed
),

flagged as (
    select game_id, rule, p, reason from upsets  -- at most the threshold already (upset_outcomes)
    union all
    select game_id, rule, p, reason from pattern_rates where p <= cast({{ var('upset_threshold') }} as double)
    union all
    select game_id, rule, min(p), min(reason) from rare_failures where p <= cast({{ var('upset_threshold') }} as double) group by game_id, rule
),

scored as (
    select
        f.game_id,
        g.variant,
        g.study,
        g.cell,
        f.rule,
        f.p as probability,
        -ln(greatest(f.p, 1e-12)) as surprise,
        f.reason,
        g.transcript_path
    from flagged as f
    inner join games as g on g.game_id = f.game_id
),

best as (
    select *, max(surprise) over (partition by study, game_id) as game_surprise from scored
),

ranked as (
    select
        s.*,
        row_number() over (partition by s.study order by s.surprise desc, s.game_id, s.rule) as rank_in_study,
        -- Games ranked by their most surprising rule; ties keep the game id order.
        dense_rank() over (partition by s.study order by s.game_surprise desc, s.game_id) as game_rank,
        z.n as study_games
    from best as s
    inner join (select study, sum(n) as n from study_sizes group by study) as z on z.study = s.study
),

final as (
    select
        game_id, variant, study, cell, rule, probability, surprise, reason, transcript_path, rank_in_study,
        -- "Read these first": the study's top games, 2% of its scored games (at least 10).
        game_rank <= greatest(10, ceil(0.02 * study_games)) as read_first
    from ranked
)

select * from final

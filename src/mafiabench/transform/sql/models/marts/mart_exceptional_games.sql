with cell_counts as (
    -- The scored games and mafia wins of each cell (int_game_outcome_counts: a few rows for a million games).
    select study, variant, cell, sum(n)::bigint as n, sum(k)::bigint as k_mafia
    from {{ ref('int_game_outcome_counts') }}
    group by study, variant, cell
    having sum(n) > 0
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
    from {{ ref('fct_games') }} as g
    inner join upset_outcomes as c
        on c.study = g.study and c.variant = g.variant and c.cell = g.cell and c.outcome_mafia_won = g.mafia_won
    where g.is_scored
),

study_sizes as (
    select study, variant, sum(n)::bigint as n
    from {{ ref('int_game_outcome_counts') }}
    group by study, variant
    having sum(n) > 0
),

pattern_rates as (
    -- A pattern's surprise is how rare it is among the study's scored games of the variant (int_game_patterns: the
    -- patterns found in each game).
    select p.*, count(*) over (partition by p.study, p.variant, p.rule) * 1.0 / s.n as p
    from {{ ref('int_game_patterns') }} as p
    inner join study_sizes as s on s.study = p.study and s.variant = p.variant
),

model_failures as (
    -- A model's failure rate at a level (int_reasoning_counts), where it is at most the threshold with a failure
    -- left out: only those models' failures are read.
    select * from (
        select model, level, sum(n)::bigint as n, sum(k)::bigint as k
        from {{ ref('int_reasoning_counts') }}
        group by model, level
    )
    where (k * 1.0) / (n + 1) <= cast({{ var('upset_threshold') }} as double)
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
    inner join {{ ref('fct_games') }} as g on g.game_id = o.game_id
    where o.failed and g.is_scored
),

flagged as (
    select game_id, rule, p, reason from upsets  -- at most the threshold already (upset_outcomes)
    union all
    select game_id, rule, p, reason from pattern_rates where p <= cast({{ var('upset_threshold') }} as double)
    union all
    select game_id, rule, min(p), min(reason) from rare_failures group by game_id, rule  -- rare (model_failures)
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
    inner join {{ ref('fct_games') }} as g on g.game_id = f.game_id
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

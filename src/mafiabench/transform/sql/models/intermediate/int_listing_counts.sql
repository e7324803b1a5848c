{#- The seat listing of finished games counted for the listing-order leak check (warehouse/listing_leaks.py, issue
    35): what mart_listing_leaks and the import report test, read in a few rows instead of every seat. A summed model
    (macros/increment.sql): an increment that adds games adds their counts. Every key is the game's own (its seats,
    teams, source and status), so a game's counts never change after it is counted. The import report, which runs
    before any build, reads this same SQL over raw_players and raw_games (`warehouse.sql_models.model_sql`): the one
    statement of the counting rule. -#}
{{ config(materialized='summed', meta={'sum_keys': ['source', 'simulated', 'n_players', 'n_mafia', 'seats',
                                                    'mafia_seats', 'position', 'is_mafia'], 'sum_rows': 'games'}) }}

with games as (
    select
        game_id,
        source = 'simulation' as simulated,
        case when source = 'simulation' then 'simulation:' || coalesce(experiment, '?') else source end as source
    from {{ ref('fct_games') }}
    where status = 'finished'
),

seats as (
    -- The player's seat as a bit of its game's mask of seats (null outside 0..62: that game is ranked apart).
    select game_id, team = 'mafia' as is_mafia, case when seat between 0 and 62 then 1::bigint << seat::bigint end as bit
    from {{ ref('int_player_games') }}
),

per_game as (
    -- A game as its number of players and of mafia, its set of seats and its set of mafia seats (two bit masks),
    -- without ordering its players.
    select
        game_id,
        count(*) as n_players,
        count(*) filter (where is_mafia) as n_mafia,
        bit_or(bit) as seats,
        coalesce(bit_or(case when is_mafia then bit end), 0) as mafia_seats
    from seats
    group by game_id
),

by_masks as (
    -- The games whose players sit on distinct seats in 0..62 (every simulated game, the imports with seats): the
    -- position of a seat is its rank among the game's seats (the order `seat nulls last, name` gives), read off the
    -- masks by the mart; games with the same masks are counted together.
    select
        g.source,
        g.simulated,
        p.n_players,
        p.n_mafia,
        p.seats,
        p.mafia_seats,
        null::bigint as position,
        null::boolean as is_mafia,
        count(*) as games
    from per_game as p
    inner join games as g on g.game_id = p.game_id
    where bit_count(p.seats) = p.n_players
    group by all
),

apart as (
    -- The other games (no seats, or seats repeated or out of range): their players ranked one at a time.
    select game_id, n_players, n_mafia
    from per_game
    where coalesce(bit_count(seats), 0) <> n_players
),

ranked as (
    -- Read apart from the seats' masks: the players' names, needed here only, stay out of the one-pass count.
    select
        p.game_id,
        a.n_players,
        a.n_mafia,
        coalesce(p.team = 'mafia', false) as is_mafia,
        row_number() over (partition by p.game_id order by p.seat nulls last, p.name) as position
    from {{ ref('int_player_games') }} as p
    inner join apart as a on a.game_id = p.game_id
),

by_position as (
    select
        g.source,
        g.simulated,
        r.n_players,
        r.n_mafia,
        null::bigint as seats,
        null::bigint as mafia_seats,
        r.position,
        r.is_mafia,
        count(*) as games
    from ranked as r
    inner join games as g on g.game_id = r.game_id
    group by all
),

final as (
    select * from by_masks
    union all by name
    select * from by_position
)

select * from final

{#- Games counted by study, line-up and category: what the leaderboard (transform/models/ratings.py) fits and
    counts, read in a few hundred rows instead of every seat. A summed model (macros/increment.sql): an increment that
    adds games adds their counts. Every key is the game's own (its seats, status and outcome): nothing here reads
    another game, so a game's counts never change after it is counted. -#}
{{ config(materialized='summed', meta={'sum_keys': ['study', 'line_up', 'variant', 'category', 'mafia_model',
                                                    'town_model', 'one_model_a_side', 'models'],
                                       'sum_rows': 'games'}) }}

with players as (
    select game_id, team, role, model, variant from {{ ref('fct_player_games') }}
),

games as (
    select game_id, study, is_scored, valid, status, mafia_won from {{ ref('fct_games') }}
),

codes as (
    -- Each distinct seat (team, role, model, variant) gets a number: a game's line-up is the multiset of its seats'
    -- numbers, an exact key that is cheap to build and group (strings joined per seat and game cost several times
    -- the CPU at a million games); everything else about the seats is read back from it once per line-up. Numbered
    -- as recorded (a role '' and a missing role are two numbers, read back as the same seat below).
    select
        team, role, model, variant, coalesce(nullif(role, ''), team) as seat_role,
        (row_number() over (order by team, role, model, variant) - 1)::integer as seat
    from (select distinct team, role, model, variant from players)
),

width as (
    -- The bits each seat number's count takes in a game's summed key: the 127 bits of a hugeint shared by the
    -- numbers, at most 62 each.
    select least(62, 127 // greatest(1, count(*)))::integer as bits from codes
),

coded as (
    select p.game_id, c.seat
    from players as p
    inner join codes as c
        on c.team is not distinct from p.team
        and c.role is not distinct from p.role
        and c.model is not distinct from p.model
        and c.variant is not distinct from p.variant
),

summed_keys as (
    -- A game's seats as the sum over them of 2^(number x bits): exact while no number occurs 2^bits times in the
    -- game, which fewer than 2^bits seats guarantee.
    select d.game_id, sum(1::hugeint << (d.seat * w.bits)) as seats, count(*) as players
    from coded as d
    cross join width as w
    group by d.game_id
),

listed_keys as (
    -- The games too large for the summed key (many seats, or many distinct seats in the warehouse): the sorted list
    -- of their seat numbers, exact for any game.
    select game_id, list_sort(list(seat)) as seat_list
    from coded
    where game_id in (
        select s.game_id from summed_keys as s cross join width as w where s.players >= (1::hugeint << w.bits)
    )
    group by game_id
),

per_game as (
    select
        s.game_id,
        case when s.players < (1::hugeint << w.bits) then s.seats end as seats,
        l.seat_list
    from summed_keys as s
    cross join width as w
    left join listed_keys as l on l.game_id = s.game_id
),

counted as (
    select g.study, s.seats, s.seat_list, g.is_scored, g.valid, g.status, count(*) as games,
        count(*) filter (where g.mafia_won) as wins
    from games as g
    inner join per_game as s on s.game_id = g.game_id
    group by all
),

distinct_keys as (
    select distinct seats, seat_list from counted
),

key_seats as (
    -- Each distinct key read back into its seats' numbers, once per seat.
    select d.seats, d.seat_list, c.seat
    from distinct_keys as d
    cross join codes as c
    cross join width as w
    cross join unnest(range(((d.seats >> (c.seat * w.bits)) & ((1::hugeint << w.bits) - 1))::bigint))
    where d.seats is not null
    union all
    select d.seats, d.seat_list, u.seat
    from distinct_keys as d
    cross join unnest(d.seat_list) as u(seat)
    where d.seat_list is not null
),

line_ups as (
    -- Each distinct line-up once, read back into its seats: min = max says one model (self-play, a pure
    -- head-to-head cell). The line-up joins team, role and model by the unit separator, which sorts below every
    -- printable character, so sorting the joined strings sorts by team, then role, then model.
    select
        k.seats,
        k.seat_list,
        count(*) filter (where c.team = 'mafia') as n_mafia,
        count(*) filter (where c.team = 'town') as n_town,
        min(c.model) filter (where c.team in ('mafia', 'town')) as min_model,
        max(c.model) filter (where c.team in ('mafia', 'town')) as max_model,
        min(c.model) filter (where c.team = 'mafia') as mafia_model,
        max(c.model) filter (where c.team = 'mafia') as mafia_max,
        min(c.model) filter (where c.team = 'town') as town_model,
        max(c.model) filter (where c.team = 'town') as town_max,
        array_to_string(list_sort(list(c.team || chr(31) || c.seat_role || chr(31) || c.model)
            filter (where c.team in ('mafia', 'town'))), chr(30)) as line_up,
        case when min(c.variant) = max(c.variant) then min(c.variant) end as variant,
        -- Every model of the game's seats, each once, whatever the seat's team (null for a seat without a model):
        -- the models the gate's mart_ratings_complete counts a rated game for.
        list_sort(list(distinct c.model)) as models
    from key_seats as k
    inner join codes as c on c.seat = k.seat
    group by k.seats, k.seat_list
),

final as (
    select
        g.study,
        s.line_up,
        s.variant,
        case when s.n_mafia = 0 or s.n_town = 0 then 'no_teams'
             when g.is_scored and s.min_model = s.max_model then 'self_play'
             when g.is_scored then 'rated'
             when g.valid = false then 'invalid'
             when g.status in ('failed', 'abandoned', 'unfinished') then g.status
             else 'no_winner' end as category,
        s.mafia_model,
        s.town_model,
        s.mafia_model = s.mafia_max and s.town_model = s.town_max as one_model_a_side,
        s.models,
        sum(g.games)::bigint as games,
        sum(g.wins)::bigint as wins
    from counted as g
    inner join line_ups as s on s.seats is not distinct from g.seats and s.seat_list is not distinct from g.seat_list
    group by all
)

select * from final

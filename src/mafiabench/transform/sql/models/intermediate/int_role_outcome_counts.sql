{#- The counts of mart_win_rates' `model_as_<role>` rows: a model in a role, once per game (two villagers of one model
    count once), by study and by the seats' own settings; a summed model (macros/increment.sql). Whether the mart
    splits a model's rows by settings is the study's (fct_player_games.settings_varied, over every game of the
    study), so it is no key here: the `per_setting` rows count each game under each setting its seats of the model in
    the role had, the others (model_settings '') each game once, and the mart reads those its study asks for. -#}
{{ config(materialized='summed', meta={'sum_keys': ['variant', 'study', 'role', 'model', 'team', 'model_settings',
                                                    'per_setting'], 'sum_rows': 'games'}) }}

{%- set key = ['variant', 'study', 'role', 'model', 'team'] %}
{%- set seen = key + ['game_id', 'is_scored', 'won', 'tie_decided', 'fallback_decided'] %}
{%- set outcomes = ['is_scored', 'won', 'tie_decided', 'fallback_decided', 'unfinished', 'invalid'] %}
{%- set counts = [
    ("n", "is_scored"),
    ("k", "is_scored and won"),
    ("k_tie", "is_scored and won and tie_decided"),
    ("n_tie_decided", "is_scored and tie_decided"),
    ("n_fallback_decided", "is_scored and fallback_decided"),
    ("n_unfinished", "unfinished"),
    ("n_invalid", "invalid"),
] %}

with flagged as materialized (
    -- The games an unfinished or invalid count needs, the only outcome a player's row does not carry.
    select game_id, status = 'unfinished' as unfinished, not valid as invalid
    from {{ ref('fct_games') }}
    where status = 'unfinished' or not valid
),

per_setting as materialized (
    -- A model in a role once per game, outcome and setting (the seats' settings as they are), counted per outcome:
    -- a few rows for a million games.
    select
        s.{{ key | join(', s.') }}, s.model_settings, s.is_scored, s.won, s.tie_decided, s.fallback_decided,
        coalesce(f.unfinished, false) as unfinished, coalesce(f.invalid, false) as invalid, count(*) as games
    from (select distinct {{ seen | join(', ') }}, model_settings from {{ ref('fct_player_games') }}) as s
    left join flagged as f on f.game_id = s.game_id
    group by all
),

several as materialized (
    -- The study's models seen here under more than one setting ('' and null included): a game may hold two of them,
    -- so those are counted again for each game once. None where a model kept its settings.
    select study, model
    from per_setting
    group by study, model
    having count(distinct model_settings) + max(case when model_settings is null then 1 else 0 end) > 1
),

once_per_game as (
    -- The other models' games counted per setting are each game once already.
    select p.{{ key | join(', p.') }}, p.{{ outcomes | join(', p.') }}, p.games
    from per_setting as p
    where not exists (
        select 1 from several as m where m.study is not distinct from p.study and m.model is not distinct from p.model
    )
    union all
    select s.{{ key | join(', s.') }}, s.is_scored, s.won, s.tie_decided, s.fallback_decided,
        coalesce(f.unfinished, false) as unfinished, coalesce(f.invalid, false) as invalid, count(*) as games
    from (
        select distinct {% for c in seen %}s.{{ c }}{{ ', ' if not loop.last }}{% endfor %}
        from {{ ref('fct_player_games') }} as s
        inner join several as m on m.study is not distinct from s.study and m.model is not distinct from s.model
    ) as s
    left join flagged as f on f.game_id = s.game_id
    group by all
),

parts as (
    select {{ key | join(', ') }}, true as per_setting, model_settings, {{ outcomes | join(', ') }}, games
    from per_setting
    union all
    select {{ key | join(', ') }}, false, '', {{ outcomes | join(', ') }}, games
    from once_per_game
),

final as (
    select
        {{ key | join(', ') }},
        model_settings,
        per_setting,
{%- for name, condition in counts %}
        coalesce(sum(games) filter (where {{ condition }}), 0)::bigint as {{ name }},
{%- endfor %}
        sum(games)::bigint as games
    from parts
    group by {{ key | join(', ') }}, model_settings, per_setting
)

select * from final

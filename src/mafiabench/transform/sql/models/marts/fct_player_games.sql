{#- settings_varied is a study's, over every game: an incremental build reads every game's settings for it, and
    rewrites the published rows of games whose settings_varied the increment changed (macros/increment.sql). -#}
{{ config(meta={'increment_rewrites': true}) }}

with players as (
    select * from {{ ref('int_player_games') }}
),

games as (
    select
        game_id, study, experiment, cell, has_communication, tie_decided, fallback_decided, last_speaker, status
    from {{ ref('fct_games') }}
),

moments as (
    -- When the first day started and when the game's last discussion turn was: who was still in the game then.
    select
        game_id,
        min(seq) filter (where event_type = 'phase_start' and phase = 'day') as first_day_seq
    from {{ ref('stg_events') }}
    where event_type = 'phase_start'
    group by game_id
),

last_turns as (
    select game_id, last_turn_seq from {{ ref('int_game_turns') }}
),

game_moments as (
    -- A game's moments joined per game (1M rows at a million games), then to its seats once.
    select g.*, m.first_day_seq, t.last_turn_seq
    from games as g
    left join moments as m on m.game_id = g.game_id
    left join last_turns as t on t.game_id = g.game_id
),

settings_per_model as (
    -- Whether the study played the model under more than one setting (say two temperatures): only then do the
    -- win-rate marts split the model's rows by them (a seat whose settings are unknown, '', is no other setting).
{%- if increment_narrows() %}
    -- Incremental: the published games' settings as published (fct_player_games carries study, model and
    -- settings), without the increment's games, beside the increment's own; the same as over every game. An
    -- increment that only adds games has none of its games published: their ids are not read then (4M seats at a
    -- million games: 0.28 -> 0.12 s).
    {{ settings_per_model_seen(
        "select study, model, model_settings from " ~ increment_published()
            ~ (" where game_id not in (select game_id from " ~ increment_games() ~ ")"
               if var('increment_replaces', false) else ""),
        "select g.study, p.model, p.model_settings from players as p inner join games as g on g.game_id = p.game_id"
    ) }}
{%- else %}
    {{ settings_per_model(ref('int_player_games'), ref('fct_games')) }}
{%- endif %}
),

final as (
    select
        p.game_id,
        p.variant,
        g.study,
        g.experiment,
        g.cell,
        p.seat,
        p.name,
        p.role,
        p.team,
        p.agent,
        p.provider,
        p.model,
        p.model_raw,
        p.model_inferred,
        p.prompt_version,
        p.prompt_sha256,
        p.temperature,
        p.reasoning_effort,
        p.max_tokens_message,
        p.max_tokens_other,
        p.model_settings,
        v.settings_varied,
        p.fate,
        p.is_scored,
        p.won,
        g.tie_decided,
        g.fallback_decided,
        g.has_communication,
        (g.last_speaker is not null and g.last_speaker = p.name) as spoke_last,
        (g.last_speaker is not null) as had_discussion,
        -- Per-player day analyses count only players who were in the game at that moment (the night victim of
        -- Mini-Mafia never played the day): still active at the first day's start, and at the last turn.
        (g.first_day_seq is not null and (p.out_seq is null or p.out_seq > g.first_day_seq)) as played_a_day,
        (g.last_turn_seq is not null and (p.out_seq is null or p.out_seq > g.last_turn_seq))
            as active_in_final_discussion
    from players as p
    inner join game_moments as g on g.game_id = p.game_id
    -- Every (study, model) of these seats is in settings_per_model, once: a left join and the seats with a model
    -- are the inner join, without DuckDB's estimate of a few rows for the join, which made it build its hash
    -- tables on the 4M seats with every column (4.7 GB of buffers at a million games, against 0.9).
    left join settings_per_model as v on v.study = g.study and v.model = p.model
    where p.model is not null
{%- if increment_narrows() %}

    union all

    -- Every row of a published game outside the increment one of whose seats' settings_varied changed.
    select f.* replace (v.settings_varied as settings_varied)
    from {{ increment_published() }} as f
    inner join settings_per_model as v on v.study = f.study and v.model = f.model
    where f.game_id in (
        select c.game_id from {{ increment_published() }} as c
        inner join settings_per_model as w on w.study = c.study and w.model = c.model
        where c.settings_varied <> w.settings_varied
    )
    {%- if var('increment_replaces', false) %}
    and f.game_id not in (select game_id from {{ increment_games() }})
    {%- endif %}
{%- endif %}
)

select * from final

{#- A discussion turn, as int_turns (one row per turn) and int_game_turns (per game) both count it: a message or a
    silence by day that no importer flagged. -#}
{% macro is_discussion_turn() -%}
event_type in ('message', 'silence') and phase = 'day' and flag is null
{%- endmacro %}

{#- Words as the pieces between single spaces of the trimmed text: one more than the spaces, the count
    `string_split(x, ' ')` gives, without building a list per turn (a third of int_turns' CPU at a million games). -#}
{% macro turn_words(event_type, trimmed) -%}
case when {{ event_type }} = 'message' then length({{ trimmed }}) - length(replace({{ trimmed }}, ' ', '')) + 1 else 0 end
{%- endmacro %}

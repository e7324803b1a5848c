{#- The transcript page of a game, the same path `mafiabench.dashboards.transcript_path` gives: the id when it is a
    safe file name, else a slug of it plus the first 10 hex digits of its sha256 (so ids never collide). -#}
{% macro transcript_path(game_id) -%}
'transcripts/' || case
    when regexp_full_match({{ game_id }}, '[A-Za-z0-9][A-Za-z0-9._-]{0,150}') and lower({{ game_id }}) <> 'index'
        then {{ game_id }}
    else coalesce(nullif(left(trim(regexp_replace({{ game_id }}, '[^A-Za-z0-9._-]+', '-', 'g'), '-.'), 80), ''), 'game')
        || '-' || left(sha256({{ game_id }}), 10)
end || '.html'
{%- endmacro %}

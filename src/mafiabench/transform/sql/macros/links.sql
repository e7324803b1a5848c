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

{#- The name of a capability cell, the one place it is formed: the design's own cell name
    (`mafiabench.study.design.expand_cells`), `<capability>|<target>|<background>`, and `homogeneous|<model>` for a
    game with one model in every role (played once for all three capabilities). The capability marts carry it as
    `capability_cell`; a capability page's bar, its link to the games list and that list's filter all read it. -#}
{% macro capability_cell(capability, target_model, background, is_homogeneous) -%}
case when {{ is_homogeneous }} then 'homogeneous|' || {{ target_model }}
     else {{ capability }} || '|' || {{ target_model }} || '|' || {{ background }} end
{%- endmacro %}

{#- Every model is built under a staged name (`__staged_<model>`) in the warehouse's main schema; the build
    publishes it under its own name (a rename, in one transaction) only after the quality gate passed, so readers
    never see an unvalidated mart (mafiabench.transform.build.marts.publish). -#}
{% macro generate_alias_name(custom_alias_name=none, node=none) -%}
    {%- if node.resource_type in ('model', 'seed', 'snapshot') -%}
        __staged_{{ custom_alias_name or node.name }}
    {%- else -%}
        {{ custom_alias_name or node.name }}
    {%- endif -%}
{%- endmacro %}

{#- Everything lives in the warehouse's main schema. -#}
{% macro generate_schema_name(custom_schema_name=none, node=none) -%}
    {{ target.schema }}
{%- endmacro %}

{#- References without the catalog name (the DuckDB file's stem), so a view stays valid when the file is renamed. -#}
{#- In an incremental build a per-game model (and a summed one) reads the deltas of what it refers to, and every
    reference to a model the build keeps (its inputs unchanged: `var('kept')`) reads its published relation
    (macros/increment.sql). -#}
{% macro ref() -%}
    {%- set rel = builtins.ref(*varargs, **kwargs) -%}
    {%- if rel is not none and rel.include is defined -%}
        {%- if increment_narrows() -%}
            {%- set delta = increment_delta_relation(rel).include(database=false) -%}
            {%- if config.get('materialized') == 'summed' -%}
                {#- The view the summed materialization points at the increment's games' rows. -#}
                {%- do return(increment_summed_reads(varargs[-1])) -%}
            {%- endif -%}
            {%- do return(delta) -%}
        {%- endif -%}
        {%- if increment_kept(varargs[-1]) -%}
            {%- do return(rel.incorporate(path={'identifier': varargs[-1]}).include(database=false)) -%}
        {%- endif -%}
        {%- do return(rel.include(database=false)) -%}
    {%- endif -%}
    {%- do return(rel) -%}
{%- endmacro %}

{% macro source() -%}
    {%- set rel = builtins.source(*varargs, **kwargs) -%}
    {%- if increment_narrows() -%}
        {%- do exceptions.raise_compiler_error("a per-game model reads staging models, not sources: " ~ model.name) -%}
    {%- endif -%}
    {%- if rel is not none and rel.include is defined -%}
        {%- do return(rel.include(database=false)) -%}
    {%- endif -%}
    {%- do return(rel) -%}
{%- endmacro %}

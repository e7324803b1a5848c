{#- Incremental builds (mafiabench.transform.build.increment). A per-game model (`materialized: per_game`: its rows
    for a game depend on that game's rows only) is built whole unless the build runs with `var('increment')`; then
    only the games in `__staged__increment_games` (landed, replaced or removed since the published build) are
    computed, into `__staged_<model>__delta`, and the staged model is a view: the published table without those
    games, and the delta. Publishing applies the delta to the published table (delete those games, insert the delta)
    in the publish transaction, after the quality gate passed: readers never see an unvalidated row, and a refused
    build drops the delta and leaves the published table as it was. Python decides the mode: incremental only when
    the project, dbt, DuckDB, the vars and the raw tables' schema are those of the published build. -#}

{% macro increment_games() -%}
main.__staged__increment_games
{%- endmacro %}

{#- True while a per-game or summed model is rendered for an incremental build: a per-game model's refs then read
    deltas, a summed model's the rows it counts by turns (see `ref`, and the summed materialization). -#}
{% macro increment_narrows() -%}
    {%- do return(execute and var('increment', false) and config.get('materialized') in ('per_game', 'summed')) -%}
{%- endmacro %}

{#- What a summed model reads of a per-game model in an incremental build: a view it points at the increment's games'
    new rows (the per-game model's delta), then at their published rows (`summed` below). -#}
{% macro increment_summed_reads(name) -%}
    {%- set view = this.incorporate(path={'identifier': this.identifier ~ '__reads_' ~ name}) -%}
    {%- do return(view.include(database=false)) -%}
{%- endmacro %}

{#- Whether the build keeps a model (mafiabench.transform.build.increment.kept_models): its inputs did not change
    since the published build, so dbt does not build it and its published relation is read instead. The build
    gives the delta of a kept model a rebuilt per-game model reads (from the published relation). -#}
{% macro increment_kept(name) -%}
    {%- do return(execute and name in var('kept', [])) -%}
{%- endmacro %}

{% macro increment_tails() -%}
main.__staged__increment_tails
{%- endmacro %}

{#- The raw table a staging view reads row for row (the staging layer's contract: one view per raw table, renamed and
    typed, 1:1): a view of the staging layer that reads one source and no model, as its SQL names it; none else. -#}
{% macro increment_row_source() -%}
    {%- if config.get('materialized') == 'view' and model.fqn[1] == 'staging' and not model.refs
            and model.sources | length == 1 -%}
        {%- set raw = source(*model.sources[0]) -%}
        {%- if (raw | string) in sql -%}
            {%- do return(raw) -%}
        {%- endif -%}
    {%- endif -%}
    {%- do return(none) -%}
{%- endmacro %}

{% macro increment_delta_relation(relation) -%}
    {%- do return(relation.incorporate(path={'identifier': relation.identifier ~ '__delta'})) -%}
{%- endmacro %}

{#- A per-game model's published rows of the increment's games, which the build takes for the summed models that read
    it when the increment replaces or removes published games (mafiabench.transform.build.marts._published_rows). -#}
{% macro increment_published_rows(relation) -%}
    {%- do return(relation.incorporate(path={'identifier': relation.identifier ~ '__published'})) -%}
{%- endmacro %}

{#- Post-hook of every model: in an incremental build, a model a per-game model reads (a staging view, int_turns)
    also gets its delta, the rows of the increment's games, once, for all its per-game readers. The increment's ids
    are a constant list (a variable of dbt's connection), not a subquery: DuckDB pushes a constant filter through the
    view down to the table scan, where a semi-join would run the view's projection (stg_events' JSON parsing) over
    every row first (a million games' 21 million events: 1.7 s of the increment's build for each such view).
    A staging view reads its raw table row for row (`increment_row_source`): its delta is its SQL over the table's
    tail, the rows from the first the build found to hold every row of the increment's games (`__staged__increment_
    tails`, mafiabench.warehouse.builds.increment_tails; row 0 where it found none: the whole table, as before),
    still filtered by the increment's ids. DuckDB skips the row groups before the tail (a million games' stg_events
    delta: 0.34 -> 0.11 s). -#}
{% macro increment_delta() -%}
    {%- if execute and var('increment', false) and config.get('materialized') != 'per_game' -%}
        {%- set read = [] -%}
        {%- for node in graph.nodes.values() -%}
            {%- if node.resource_type == 'model' and node.config.materialized == 'per_game'
                    and model.unique_id in node.depends_on.nodes and not increment_kept(node.name) -%}
                {%- do read.append(node.name) -%}
            {%- endif -%}
        {%- endfor -%}
        {%- if read -%}
            {%- set raw = increment_row_source() -%}
set variable mafiabench_increment_games = (
    select coalesce(list(game_id), []::VARCHAR[]) from {{ increment_games() }}
);
            {%- if raw is not none %}
                {%- set tail = 'mafiabench_increment_tail_' ~ raw.identifier %}
set variable {{ tail }} = coalesce((
    select first_row from {{ increment_tails() }} where source = '{{ raw.identifier }}'
), 0);
create or replace table {{ increment_delta_relation(this).include(database=false) }} as
select * from (
{{ sql | replace(raw | string, '(select * from ' ~ raw ~ " where rowid >= getvariable('" ~ tail ~ "'))") }}
)
where list_contains(getvariable('mafiabench_increment_games'), game_id)
            {%- else %}
create or replace table {{ increment_delta_relation(this).include(database=false) }} as
select * from {{ this.include(database=false) }}
where list_contains(getvariable('mafiabench_increment_games'), game_id)
            {%- endif -%}
        {%- endif -%}
    {%- endif -%}
{%- endmacro %}

{#- The published table of the model being built (its staged name without the prefix), read by its full name
    through query_table: the build's Python models and gate read each staged relation under its model's name (a
    temporary view), which would shadow the published name in a view (DuckDB drops a view's own catalog from the
    names it stores). Only staged relations read it, and publishing drops or creates those again. -#}
{% macro increment_published() -%}
    {%- set table = api.Relation.create(database=this.database, schema=this.schema, identifier=model.name) -%}
    query_table('{{ table | replace("'", "''") }}')
{%- endmacro %}

{#- Where a per-game model's delta also rewrites published games outside the increment (`meta.increment_rewrites`:
    fct_player_games, when new games change a study's settings_varied), their ids. -#}
{% macro increment_rewritten_relation(relation) -%}
    {%- do return(relation.incorporate(path={'identifier': relation.identifier ~ '__rewritten'})) -%}
{%- endmacro %}

{% materialization per_game, adapter='duckdb' %}
    {%- set target = this.incorporate(type='table') -%}
    {%- set delta = increment_delta_relation(target) -%}
    {%- set rewritten = increment_rewritten_relation(target) -%}
    {%- set rewrites = (config.get('meta') or {}).get('increment_rewrites', false) -%}
    {{ drop_relation_if_exists(load_cached_relation(delta)) }}
    {{ drop_relation_if_exists(load_cached_relation(rewritten)) }}
    {{ drop_relation_if_exists(load_cached_relation(this)) }}
    {{ run_hooks(pre_hooks, inside_transaction=True) }}
    {%- if var('increment', false) -%}
        {% call statement('main') -%}
            {{ create_table_as(False, delta, sql) }}
        {%- endcall %}
        {%- if rewrites -%}
            {% call statement('increment_rewritten') -%}
                create table {{ rewritten.include(database=false) }} as
                select distinct game_id from {{ delta.include(database=false) }}
                where game_id not in (select game_id from {{ increment_games() }})
            {%- endcall %}
        {%- endif %}
        {% call statement('increment_view') -%}
            create view {{ this.include(database=false) }} as
            select * from {{ increment_published() }} as p
            where true
            {%- if var('increment_replaces', false) %}
                and not exists (select 1 from {{ increment_games() }} as i where i.game_id = p.game_id)
            {%- endif %}
            {%- if rewrites %}
                and not exists (select 1 from {{ rewritten.include(database=false) }} as r where r.game_id = p.game_id)
            {%- endif %}
            union all by name
            select * from {{ delta.include(database=false) }}
        {%- endcall %}
        {%- set target = this.incorporate(type='view') -%}
    {%- else -%}
        {% call statement('main') -%}
            {{ create_table_as(False, target, sql) }}
        {%- endcall %}
    {%- endif -%}
    {{ run_hooks(post_hooks, inside_transaction=True) }}
    {{ adapter.commit() }}
    {{ return({'relations': [target]}) }}
{% endmaterialization %}

{#- A *summed* model (`materialized: summed`, `meta: {sum_keys: [...], sum_rows: ...}`): additive integer counts by
    key, a sum of per-game contributions, for a mart to read in few rows instead of every game. Its contract:
    - it reads per-game models only (a ref to anything else is refused), and no column it groups or counts by depends
      on other games (not fct_player_games.settings_varied, nor a cell's or study's rate): count by the per-game
      inputs (model_settings and study, say) and let the mart apply the cross-game part to the counts;
    - its rows are unique by `sum_keys` (nulls allowed: a null key is one group), and every other column is an
      integer count (TINYINT ... HUGEINT; checked at each build) that is a sum over the games it reads: count(*),
      count(*) filter (...), sum of an integer column, count(distinct game_id) (a game is counted in one part only);
      never a float, an average, a list or any_value (a `select distinct ... game_id` that counts a game once per key
      is a sum over games: keep game_id in it);
    - `sum_rows` names a count that is positive in every row (the games or rows behind the key, checked at each
      build): a key whose count falls to 0 holds no game any more, and leaves the table, as a whole build has it;
    - it is built whole as written in a whole build; in an incremental build its SQL is rendered with every ref read
      through a view of its own (`increment_summed_reads`), pointed first at the increment's games' new rows (the
      per-game deltas; a delta's rows of other games, fct_player_games' rewritten ones, are left out) and, when the
      increment replaces or removes published games, then at those games' published rows (of the per-game tables the
      published counts were made from, untouched until the publish; taken once for all readers by the build); its
      staged table is the published table, plus the first, minus the second, summed by key, without the keys no game
      holds any more. All three are small, so the build costs what the increment's games cost, not every game's. The staged relation is a whole table,
      published by a rename like any mart's; the plan (`transform.build.increment.plan`) builds whole while it is
      unpublished.
    Its counts are exact by construction: tests compare increments that add, replace and remove games with a full
    rebuild, row for row. -#}
{% materialization summed, adapter='duckdb' %}
    {%- set keys = (config.get('meta') or {}).get('sum_keys') or [] -%}
    {%- set rows = (config.get('meta') or {}).get('sum_rows') -%}
    {%- if not keys or not rows -%}
        {%- do exceptions.raise_compiler_error("a summed model declares its key columns (meta.sum_keys) and a count "
            ~ "positive in every row (meta.sum_rows): " ~ model.name) -%}
    {%- endif -%}
    {%- set reads = [] -%}
    {%- for uid in model.depends_on.nodes -%}
        {%- set node = graph.nodes.get(uid) -%}
        {%- if node is none or node.resource_type != 'model' or node.config.materialized != 'per_game' -%}
            {%- do exceptions.raise_compiler_error("a summed model reads per-game models only: " ~ model.name
                ~ " reads " ~ uid) -%}
        {%- endif -%}
        {%- do reads.append(node.name) -%}
    {%- endfor -%}
    {%- set target = this.incorporate(type='table') -%}
    {%- set delta = increment_delta_relation(target) -%}
    {%- set removed = target.incorporate(path={'identifier': target.identifier ~ '__removed'}) -%}
    {%- set replaces = var('increment_replaces', false) -%}
    {{ drop_relation_if_exists(load_cached_relation(delta)) }}
    {{ drop_relation_if_exists(load_cached_relation(removed)) }}
    {{ drop_relation_if_exists(load_cached_relation(this)) }}
    {{ run_hooks(pre_hooks, inside_transaction=True) }}
    {%- if increment_narrows() -%}
        {% call statement('increment_reads_added') -%}
            {%- for name in reads %}
            create or replace view {{ increment_summed_reads(name) }} as
            select * from {{ increment_delta_relation(builtins.ref(name)).include(database=false) }}
            where game_id in (select game_id from {{ increment_games() }});
            {%- endfor %}
        {%- endcall %}
        {% call statement('main') -%}
            {{ create_table_as(False, delta, sql) }}
        {%- endcall %}
        {%- set columns = summed_columns(delta, keys, rows) -%}
        {%- if replaces -%}
            {% call statement('increment_reads_removed') -%}
                {%- for name in reads %}
                create or replace view {{ increment_summed_reads(name) }} as
                select * from {{ increment_published_rows(builtins.ref(name)).include(database=false) }};
                {%- endfor %}
            {%- endcall %}
            {% call statement('increment_removed') -%}
                {{ create_table_as(False, removed, sql) }}
            {%- endcall %}
        {%- endif %}
        {% call statement('increment_sum') -%}
            create table {{ target.include(database=false) }} as
            select
            {%- for column in columns %}
                {% if column.name in keys -%}
                    {{ adapter.quote(column.name) }}
                {%- else -%}
                    sum({{ adapter.quote(column.name) }})::{{ column.dtype }} as {{ adapter.quote(column.name) }}
                {%- endif %}{{ ',' if not loop.last }}
            {%- endfor %}
            from (
                select * from {{ increment_published() }}
                union all by name
                select * from {{ delta.include(database=false) }}
                {%- if replaces %}
                union all by name
                select
                {%- for column in columns %}
                    {% if column.name in keys -%}
                        {{ adapter.quote(column.name) }}
                    {%- else -%}
                        -({{ adapter.quote(column.name) }}::hugeint) as {{ adapter.quote(column.name) }}
                    {%- endif %}{{ ',' if not loop.last }}
                {%- endfor %}
                from {{ removed.include(database=false) }}
                {%- endif %}
            )
            group by {% for key in keys %}{{ adapter.quote(key) }}{{ ', ' if not loop.last }}{% endfor %}
            having sum({{ adapter.quote(rows) }}) > 0
        {%- endcall %}
        {% call statement('increment_sum_done') -%}
            drop table {{ delta.include(database=false) }};
            {%- if replaces %}
            drop table {{ removed.include(database=false) }};
            {%- endif %}
            {%- for name in reads %}
            drop view {{ increment_summed_reads(name) }};
            {%- endfor %}
        {%- endcall %}
    {%- else -%}
        {% call statement('main') -%}
            {{ create_table_as(False, target, sql) }}
        {%- endcall %}
        {%- do summed_columns(target, keys, rows) -%}
    {%- endif -%}
    {{ run_hooks(post_hooks, inside_transaction=True) }}
    {{ adapter.commit() }}
    {{ return({'relations': [target]}) }}
{% endmaterialization %}

{#- A summed model's columns, each key present, every other column an integer count, and `rows` one of them,
    positive in every row (its contract above). -#}
{% macro summed_columns(relation, keys, rows) -%}
    {%- set columns = adapter.get_columns_in_relation(relation) -%}
    {%- set names = columns | map(attribute='name') | list -%}
    {%- for key in keys if key not in names -%}
        {%- do exceptions.raise_compiler_error("summed model " ~ model.name ~ ": its key " ~ key ~ " is no column") -%}
    {%- endfor -%}
    {%- if rows not in names or rows in keys -%}
        {%- do exceptions.raise_compiler_error("summed model " ~ model.name ~ ": its sum_rows " ~ rows
            ~ " is no count column") -%}
    {%- endif -%}
    {%- set counted = run_query('select count(*) from ' ~ relation.include(database=false) ~ ' where not coalesce('
        ~ adapter.quote(rows) ~ ' > 0, false)') -%}
    {%- if counted.rows[0][0] > 0 -%}
        {%- do exceptions.raise_compiler_error("summed model " ~ model.name ~ ": its sum_rows " ~ rows
            ~ " is not positive in " ~ counted.rows[0][0] ~ " rows") -%}
    {%- endif -%}
    {%- for column in columns if column.name not in keys and column.dtype | upper not in
            ('TINYINT', 'SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', 'UTINYINT', 'USMALLINT', 'UINTEGER', 'UBIGINT',
             'UHUGEINT') -%}
        {%- do exceptions.raise_compiler_error("summed model " ~ model.name ~ ": " ~ column.name ~ " is "
            ~ column.dtype ~ ", not an integer count (every column but its sum_keys is summed)") -%}
    {%- endfor -%}
    {%- do return(columns) -%}
{%- endmacro %}

{#- fct_player_games.settings_varied: whether a study played a model under more than one setting. -#}
{% macro settings_per_model(players, games) -%}
    {{ settings_per_model_seen(
        "select g.study, p.model, p.model_settings from " ~ players ~ " as p inner join " ~ games
            ~ " as g on g.game_id = p.game_id"
    ) }}
{%- endmacro %}

{#- The same from (study, model, model_settings) rows: each query given is one part of every game's seats. -#}
{% macro settings_per_model_seen() -%}
    select study, model, count(distinct nullif(model_settings, '')) > 1 as settings_varied
    from (
        {%- for part in varargs %}
        {{ 'union all ' if not loop.first }}select distinct study, model, model_settings from ({{ part }})
        {%- endfor %}
    )
    group by study, model
{%- endmacro %}

{#- dbt's `unique` test (dispatched here from dbt's own: the project's macro wins), as an increment that only adds
    games can check a per-game model: its staged relation is then the published table and the delta (per_game
    above), the published rows passed this test when they were published (the quality gate), so any repeat involves
    a delta row, and the delta's values counted over the delta and the published rows holding them give dbt's rows
    (a million games' fct_games: 0.40 -> 0.03 s). Any other model or build (whole, replacing games, the model kept)
    runs dbt's own SQL, as dbt's default__test_unique writes it. -#}
{% macro duckdb__test_unique(model, column_name) -%}
{%- set name = model.identifier[9:] if model.identifier.startswith('__staged_') else none -%}
{%- set per_game = [] -%}
{%- if execute and name and var('increment', false) and not var('increment_replaces', false)
        and not increment_kept(name) -%}
    {%- for node in graph.nodes.values() if node.resource_type == 'model' and node.name == name
            and node.config.materialized == 'per_game' -%}
        {%- do per_game.append(node) -%}
    {%- endfor -%}
{%- endif -%}
{%- if per_game %}
with delta as (
    select {{ column_name }} as unique_field
    from {{ increment_delta_relation(model) }}
    where {{ column_name }} is not null
),

published as (
    select {{ column_name }} as unique_field
    from {{ model.incorporate(path={'identifier': name}) }}
    where {{ column_name }} in (select unique_field from delta)
),

final as (
    select unique_field, count(*) as n_records
    from (select * from delta union all select * from published)
    group by unique_field
    having count(*) > 1
)

select * from final
{%- else %}
select
    {{ column_name }} as unique_field,
    count(*) as n_records

from {{ model }}
where {{ column_name }} is not null
group by {{ column_name }}
having count(*) > 1
{%- endif %}
{%- endmacro %}

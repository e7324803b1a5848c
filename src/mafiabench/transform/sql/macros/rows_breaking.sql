{#- A data test declared in the YAML beside its model: the rows of `model` that match `filter` and break the rule,
    i.e. for which `condition` holds, shown as `columns`. With `group_by`, the rows are grouped first (`columns` then
    aggregate them) and `condition` is over the groups' columns. -#}
{% test rows_breaking(model, condition, columns='*', filter='true', group_by=none) %}
{%- if group_by %}
with groups as (
    select {{ columns }}
    from {{ model }}
    where {{ filter }}
    group by {{ group_by }}
)

select *
from groups
where {{ condition }}
{%- else %}
select {{ columns }}
from {{ model }}
where ({{ filter }}) and ({{ condition }})
{%- endif %}
{% endtest %}

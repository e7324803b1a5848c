-- rule: every published rate and interval lies in [0, 1], with low <= mean <= high
with rates as (
    select 'mart_win_rates' as mart, variant || '/' || dimension || '=' || value as grp,
        laplace_mean, wilson_low, wilson_high, rate
    from {{ ref('mart_win_rates') }}
    union all
    select 'mart_capability_win_rates', study || '/' || capability || '/' || background || '/' || target_model,
        laplace_mean, wilson_low, wilson_high, rate
    from {{ ref('mart_capability_win_rates') }}
    union all
    select 'mart_reasoning_failures', variant || '/' || prompt_version || '/L' || level || '/' || model,
        laplace_mean, wilson_low, wilson_high, rate
    from {{ ref('mart_reasoning_failures') }}
    union all
    select 'mart_format_failures', variant || '/' || prompt_version || '/' || model || '/' || role || '/' || action,
        laplace_mean, wilson_low, wilson_high, rate
    from {{ ref('mart_format_failures') }}
)

select *
from rates
where laplace_mean not between 0 and 1
    or wilson_low not between 0 and 1
    or wilson_high not between 0 and 1
    or wilson_low > wilson_high + 1e-12
    or (rate is not null and rate not between 0 and 1)

-- rule: a failure rate's interval counting games lies in [0, 1] and holds its Wilson interval (design effect at least 1)
with intervals as (
    select 'mart_reasoning_failures' as mart, variant || '/' || prompt_version || '/L' || level || '/' || model as grp,
        rate, wilson_low, wilson_high, design_effect, wilson_low_by_game, wilson_high_by_game
    from {{ ref('mart_reasoning_failures') }}
    union all
    select 'mart_format_failures', variant || '/' || prompt_version || '/' || model || '/' || role || '/' || action,
        rate, wilson_low, wilson_high, design_effect, wilson_low_by_game, wilson_high_by_game
    from {{ ref('mart_format_failures') }}
)

select *
from intervals
where design_effect is null
    or design_effect < 1
    or wilson_low_by_game not between 0 and 1
    or wilson_high_by_game not between 0 and 1
    or wilson_low_by_game > wilson_low + 1e-12
    or wilson_high_by_game < wilson_high - 1e-12

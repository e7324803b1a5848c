-- rule: in a homogeneous cell (one model in every role) the same games feed all three capabilities, so
-- deceive + detect = 1 and detect = disclose (posterior means), with equal n, and n > 0 (over no scored game
-- every posterior mean is 1/2 and the identities would hold for nothing)
with homogeneous as (
    select * from {{ ref('mart_capability_win_rates') }} where is_homogeneous
),

pivoted as (
    select
        study,
        prompt_version,
        target_model,
        background,
        max(laplace_mean) filter (where capability = 'deceive') as deceive,
        max(laplace_mean) filter (where capability = 'detect') as detect,
        max(laplace_mean) filter (where capability = 'disclose') as disclose,
        max(n) filter (where capability = 'deceive') as n_deceive,
        max(n) filter (where capability = 'detect') as n_detect,
        max(n) filter (where capability = 'disclose') as n_disclose
    from homogeneous
    group by study, prompt_version, target_model, background
)

select *
from pivoted
where deceive is null or detect is null or disclose is null
    or abs(deceive + detect - 1.0) > 1e-9
    or abs(detect - disclose) > 1e-9
    or n_deceive <> n_detect or n_detect <> n_disclose
    or n_deceive = 0

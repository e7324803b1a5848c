with cells as (
    select * from {{ ref('mart_capability_win_rates') }} where n > 0
),

standardised as (
    select
        *,
        avg(laplace_mean) over bg as background_mean,
        -- Sample sd across the background's targets, as in the Mini-Mafia study.
        stddev_samp(laplace_mean) over bg as background_sd,
        count(*) over bg as background_targets,
        -- The reference's own figures: rates and sds in percent rounded to 2 decimals before standardising (its
        -- win_rates.csv, which its results_table.csv and results_table_zscores.csv are computed from).
        avg(round(100 * laplace_mean, 2)) over bg as published_background_mean,
        stddev_samp(round(100 * laplace_mean, 2)) over bg as published_background_sd
    from cells
    window bg as (partition by study, prompt_version, capability, background)
),

z as (
    select
        *,
        -- With sd = 0 every target is average (z = 0); the background mean and sd are treated as constants.
        case when background_sd > 0 then (laplace_mean - background_mean) / background_sd else 0.0 end as z,
        case when background_sd > 0 then beta_sd / background_sd else 0.0 end as z_sd,
        case when published_background_sd > 0
            then (round(100 * laplace_mean, 2) - published_background_mean) / published_background_sd
            else 0.0 end as published_z,
        case when published_background_sd > 0
            then round(100 * beta_sd, 2) / published_background_sd else 0.0 end as published_z_sd
    from standardised
    where background_targets >= 2
),

averaged as (
    select
        study,
        prompt_version,
        variant,
        capability,
        target_model,
        count(*) as n_backgrounds,
        sum(n) as n_games,
        avg(z) as mean_z,
        sqrt(sum(z_sd * z_sd)) / count(*) as mean_z_sd,
        avg(published_z) as published_mean_z,
        sqrt(sum(published_z_sd * published_z_sd)) / count(*) as published_mean_z_sd
    from z
    group by study, prompt_version, variant, capability, target_model
),

final as (
    select
        study,
        prompt_version,
        variant,
        capability,
        target_model,
        n_backgrounds,
        n_games,
        mean_z,
        mean_z_sd,
        exp(mean_z) as score,
        exp(mean_z) * mean_z_sd as score_sd,
        exp(mean_z - 1.959963984540054 * mean_z_sd) as score_low,
        exp(mean_z + 1.959963984540054 * mean_z_sd) as score_high,
        published_mean_z,
        published_mean_z_sd,
        exp(published_mean_z) as published_score,
        exp(published_mean_z) * published_mean_z_sd as published_score_sd
    from averaged
)

select * from final

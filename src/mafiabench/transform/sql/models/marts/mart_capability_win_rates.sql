with cells as (
    select * from {{ ref('int_capability_games') }}
),

counted as (
    select
        study,
        prompt_version,
        variant,
        capability,
        background,
        target_model,
        capability_cell,
        -- Any of the cell's games whose background models an importer inferred (the web game's session labels).
        bool_or(background_inferred) as background_inferred,
        any_value(target_role) as target_role,
        bool_and(is_homogeneous) as is_homogeneous,
        count(*) filter (where is_scored) as n,
        count(*) filter (where is_scored and target_won) as k,
        count(*) filter (where is_scored and target_won and tie_decided) as k_tie,
        count(*) filter (where not is_scored) as n_unscored
    from cells
    group by study, prompt_version, variant, capability, background, target_model, capability_cell
),

final as (
    select
        study,
        prompt_version,
        variant,
        capability,
        background,
        background_inferred,
        target_model,
        capability_cell,
        target_role,
        is_homogeneous,
        n,
        k,
        k_tie,
        k - k_tie as k_clean,
        case when n > 0 then k * 1.0 / n end as rate,
        {{ rate_columns('k', 'n') }},
        n_unscored
    from counted
)

select * from final

with games as (
    select * from {{ ref('fct_games') }}
    where variant = 'classic' and is_scored
),

configured as (
    select
        game_id,
        study,
        prompt_version,
        n_players,
        n_mafia,
        mafia_won,
        winner,
        -- One model in every seat is the protocol (GPT-4.1 everywhere, or the Claude 3 Sonnet cross-check).
        case when is_homogeneous then mafioso_model else 'mixed' end as model,
        coalesce(nullif(concat_ws('+',
            case when speaking = false then 'no_speaking' end,
            case when sampling = 'argmax' then 'argmax_voting' end,
            case when memory = 'current_phase' then 'limited_memory' end,
            case when memory = 'full' then 'full_memory' end
        ), ''), 'baseline') as configuration
    from games
),

arms as (
    -- A study's main arm: the (model, prompt version) that played most of its baseline games; other arms are
    -- cross-checks (the paper's Claude 3 Sonnet games) or named variants (a condensed prompt).
    select
        study,
        model,
        prompt_version,
        row_number() over (partition by study order by count(*) desc, model, prompt_version) as arm_rank
    from configured
    where configuration = 'baseline'
    group by study, model, prompt_version
),

final as (
    select
        c.*,
        c.n_mafia * 1.0 / c.n_players as mafia_ratio,
        coalesce(a.arm_rank = 1, false) as is_main_arm,
        coalesce(a.arm_rank = 1, false) and c.configuration = 'baseline' as is_main
    from configured as c
    left join arms as a
        on a.study = c.study and a.model = c.model and a.prompt_version is not distinct from c.prompt_version
)

select * from final

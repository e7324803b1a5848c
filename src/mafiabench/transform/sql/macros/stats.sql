{#- Win-rate statistics shared by every mart: one definition of the Laplace/Beta posterior and the Wilson interval,
    so marts cannot disagree. Beta(k+1, n-k+1) is the posterior of a win rate under a uniform prior (the Mini-Mafia
    study's estimator). Arguments are SQL expressions (strings); each is parenthesised where used. -#}

{% macro laplace_mean(k, n) -%}
(({{ k }}) + 1.0) / (({{ n }}) + 2.0)
{%- endmacro %}

{% macro beta_sd(k, n) -%}
sqrt((({{ k }}) + 1.0) * (({{ n }}) - ({{ k }}) + 1.0) / ((({{ n }}) + 2.0) * (({{ n }}) + 2.0) * (({{ n }}) + 3.0)))
{%- endmacro %}

{#- Wilson score interval at 95% (z = 1.959963984540054); an empty group gets the uninformative [0, 1]. -#}
{% macro wilson_low(k, n) -%}
case when ({{ n }}) > 0 then greatest(0.0, (
    (({{ k }}) * 1.0 / ({{ n }})) + 3.841458820694124 / (2.0 * ({{ n }}))
    - 1.959963984540054 * sqrt((({{ k }}) * 1.0 / ({{ n }})) * (1.0 - ({{ k }}) * 1.0 / ({{ n }})) / ({{ n }})
        + 3.841458820694124 / (4.0 * ({{ n }}) * ({{ n }})))
) / (1.0 + 3.841458820694124 / ({{ n }}))) else 0.0 end
{%- endmacro %}

{% macro wilson_high(k, n) -%}
case when ({{ n }}) > 0 then least(1.0, (
    (({{ k }}) * 1.0 / ({{ n }})) + 3.841458820694124 / (2.0 * ({{ n }}))
    + 1.959963984540054 * sqrt((({{ k }}) * 1.0 / ({{ n }})) * (1.0 - ({{ k }}) * 1.0 / ({{ n }})) / ({{ n }})
        + 3.841458820694124 / (4.0 * ({{ n }}) * ({{ n }})))
) / (1.0 + 3.841458820694124 / ({{ n }}))) else 1.0 end
{%- endmacro %}

{#- The Mini-Mafia study's interval of a rate: the Laplace mean -+ 1.96 Beta sds, clipped to [0, 1]
    (serendipitous_results/name_bias.py of bastoscostadavi/llm-mafia-game). -#}
{% macro normal_low(k, n) -%}
greatest(0.0, {{ laplace_mean(k, n) }} - 1.96 * {{ beta_sd(k, n) }})
{%- endmacro %}

{% macro normal_high(k, n) -%}
least(1.0, {{ laplace_mean(k, n) }} + 1.96 * {{ beta_sd(k, n) }})
{%- endmacro %}

{#- The four columns every rate mart carries, in this order: laplace_mean, beta_sd, wilson_low, wilson_high. -#}
{% macro rate_columns(k, n) -%}
{{ laplace_mean(k, n) }} as laplace_mean,
        {{ beta_sd(k, n) }} as beta_sd,
        {{ wilson_low(k, n) }} as wilson_low,
        {{ wilson_high(k, n) }} as wilson_high
{%- endmacro %}

{#- A rate k / n with the game as the unit, where a game holds several of the decisions counted, which then are not
    independent (a model that breaks the format once in a game is likelier to again). `sd_by_game`: the
    cluster-robust sd over games, sqrt(G / (G - 1) * sum_g (k_g - rate * n_g)^2) / n, the factor G / (G - 1) for few
    games; `residuals` is that sum over games. Null with fewer than two games. Like any, too narrow with few games
    (tens), and 0 where every game's rate is the same. -#}
{% macro sd_by_game(games, residuals, n) -%}
case when ({{ games }}) > 1 and ({{ n }}) > 0
    then sqrt(({{ games }}) / (({{ games }}) - 1.0) * greatest({{ residuals }}, 0)) / ({{ n }}) end
{%- endmacro %}

{#- Kish's design effect of that rate: its variance counting games over the binomial's counting decisions,
    sd_by_game^2 / (rate (1 - rate) / n), at least 1 (Korn and Graubard's truncation: never narrower than the
    binomial, which holds a few games that all went one way, where the variance counting games is 0); 1 where it
    cannot be estimated (one game, or a rate of 0 or 1). The Wilson interval on the effective sample size
    n / design_effect (k / design_effect failures) holds where the decisions of a game go together. -#}
{% macro design_effect(k, n, sd) -%}
case when ({{ sd }}) is not null and ({{ k }}) > 0 and ({{ k }}) < ({{ n }})
    then greatest(1.0, ({{ sd }}) * ({{ sd }}) * ({{ n }}) * ({{ n }}) * ({{ n }})
        / (({{ k }}) * 1.0 * (({{ n }}) - ({{ k }}))))
    else 1.0 end
{%- endmacro %}

{#- The columns a failure-rate mart ends with, from its `sd_by_game` and `design_effect`: those two and the Wilson
    interval on the effective sample size. -#}
{% macro rate_by_game_columns(k, n) -%}
sd_by_game,
        design_effect,
        {{ wilson_low(k ~ ' / design_effect', n ~ ' / design_effect') }} as wilson_low_by_game,
        {{ wilson_high(k ~ ' / design_effect', n ~ ' / design_effect') }} as wilson_high_by_game
{%- endmacro %}

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

-- Whether a telemetry value can be a reading of its warehouse column (sample_value_ok), and if not, why
-- (sample_value_problem; '' when it can). NULL, the metric absent, can. Every load path (Parquet and CSV day
-- files, Prometheus text and OpenMetrics, the Prometheus and VictoriaMetrics HTTP API, VictoriaMetrics export)
-- reaches the engine through etl/telemetry_insert.py, which stores a value that cannot as NULL and sends the
-- sample to etl_quarantine with the reason. Before, a NaN power sample made a GPU's mean power NaN (shown
-- null), a NaN or Inf energy counter made the month's energy null and `ops-report telemetry` fail (the
-- integer cast of an infinite sum), and −50 W or a utilization of 250 % moved the means. The ranges:
-- sample_value_range.
CREATE OR REPLACE FUNCTION sample_value_ok {{on_cluster}} AS (column, v, model_name) ->
    ifNull(isFinite(v) AND v >= sample_value_range(column, model_name).1
           AND v <= sample_value_range(column, model_name).2, 1);
CREATE OR REPLACE FUNCTION sample_value_problem {{on_cluster}} AS (column, v, model_name) ->
    multiIf(sample_value_ok(column, v, model_name), '',
            isNaN(v), 'not a number',
            NOT isFinite(v), 'infinite',
            isInfinite(sample_value_range(column, model_name).2), 'negative',
            concat('outside ', toString(sample_value_range(column, model_name).1), '-',
                   toString(sample_value_range(column, model_name).2), sample_value_range(column, model_name).3));

-- The most power a GPU can draw, in W: the bound a telemetry value is held to (a power gauge above it is
-- not a reading; an energy counter's step implying more is not a reset: sample_value_problem, counter_step_bounded)
-- and the law gpu_energy_within_peak_power (sql/checks/). 2,000 W for every model: above the max board power
-- of every GPU dcgm-exporter reports today (B300/GB300 1,400 W, B200 1,000-1,200 W, H100/H200 SXM 700 W,
-- A100 SXM 400-500 W), with room for a sample's averaging and the scrape's timing. A site may tighten it
-- per model (the argument is dcgm-exporter's modelName) and run `ops-report etl refresh`.
CREATE OR REPLACE FUNCTION gpu_max_power_w {{on_cluster}} AS (model_name) -> toFloat64(2000);

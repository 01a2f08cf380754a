-- The values a telemetry column can read, (lowest, highest, unit): the ranges of docs/telemetry.md, from the
-- exporters' own definitions. Utilization is %, the DCP activities are ratios of time, a GPU's power is below
-- gpu_max_power_w (its argument: dcgm-exporter's modelName, '' for node-level columns); amounts, sizes,
-- rates, clocks and masks are never negative; a temperature may be anything finite. sample_value_ok and
-- sample_value_problem read it: a column and model are constants of a load's statement, so the engine
-- works the range out once.
CREATE OR REPLACE FUNCTION sample_value_range {{on_cluster}} AS (column, model_name) ->
    multiIf(column = 'gpu_util_pct', (0., 100., ' %'),
            column IN ('sm_active', 'gr_engine_active', 'tensor_active', 'dram_active'), (0., 1., ''),
            column = 'power_w', (0., gpu_max_power_w(model_name), ' W (gpu_max_power_w)'),
            column = 'temp_c', (-inf, inf, ''),
            (0., inf, ''));

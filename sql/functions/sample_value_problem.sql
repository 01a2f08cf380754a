-- Why a telemetry value cannot be a reading of its warehouse column, or '' when it can (NULL, the metric
-- absent, can). Every load path (Parquet and CSV day files, Prometheus text and OpenMetrics, the Prometheus
-- and VictoriaMetrics HTTP API, VictoriaMetrics export) reaches the engine through etl/telemetry_insert.py,
-- which stores such a value as NULL and sends the sample to etl_quarantine with this reason. Before, a NaN
-- power sample made a GPU's mean power NaN (shown null) and a NaN or Inf energy counter made the month's
-- energy null and `ops-report telemetry` fail (the integer cast of an infinite sum). The ranges are the
-- exporters' own definitions (docs/telemetry.md): utilization in %, DCP activities as ratios, power below
-- gpu_max_power_w; amounts, sizes, rates and clocks are never negative. `model_name` is dcgm-exporter's
-- modelName ('' for node-level columns).
CREATE OR REPLACE FUNCTION sample_value_problem {{on_cluster}} AS (column, v, model_name) ->
    multiIf(v IS NULL, '',
            isNaN(v), 'not a number',
            NOT isFinite(v), 'infinite',
            column = 'gpu_util_pct' AND NOT (v BETWEEN 0 AND 100), 'outside 0-100 %',
            column IN ('sm_active', 'gr_engine_active', 'tensor_active', 'dram_active') AND NOT (v BETWEEN 0 AND 1),
            'outside 0-1',
            column = 'power_w' AND NOT (v BETWEEN 0 AND gpu_max_power_w(model_name)),
            concat('outside 0-', toString(gpu_max_power_w(model_name)), ' W (gpu_max_power_w)'),
            column IN ('energy_j', 'nvlink_bytes', 'nic_rx_bytes', 'nic_tx_bytes', 'lustre_read_bytes',
                       'lustre_write_bytes', 'fb_used_mib', 'fb_free_mib', 'node_power_w', 'sm_clock_mhz',
                       'pcie_tx_bytes_per_s', 'pcie_rx_bytes_per_s', 'nvlink_tx_bytes_per_s',
                       'nvlink_rx_bytes_per_s', 'throttle_reasons', 'xid_last') AND v < 0, 'negative',
            '');

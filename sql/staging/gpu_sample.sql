-- Exporter samples -> gpu_sample rows of the window [from_ts, to_ts).
-- {{input}} is the exporter rows renamed to warehouse columns by the metric catalog (etl/telemetry_insert.py
-- renders it: node, gpu, ts, model_name, uuid, hpc_job (dcgm-exporter's job label, '' without it) and every metric column, counters still cumulative). Rows
-- before the window (the previous day's last sample per GPU) only seed the counters.
-- energy_j and nvlink_bytes are counters: stored as the amount in the step (counter_step, sql/functions/),
-- so any later roll-up is a plain sum. Energy steps from the series' last value the load has (a sample
-- whose value was quarantined, NULL here, is stepped over, not lost with the step after it) and is held to
-- what the GPU can draw in the step (counter_step_bounded, gpu_max_power_w): a drop to a value no reset
-- within the step could reach is not a reset. gpu_util_pct is DCGM_FI_DEV_GPU_UTIL, else (an exporter without it)
-- DCGM_FI_PROF_GR_ENGINE_ACTIVE × 100; util_source says which (sql/migrations/0019_gpu_instances.sql).
INSERT INTO gpu_sample (cluster, node, gpu, ts, step_s, model_name, uuid, hpc_job, gpu_util_pct, sm_active,
    gr_engine_active, tensor_active, dram_active, fb_used_mib, fb_free_mib, power_w, energy_j, temp_c,
    sm_clock_mhz, throttle_reasons, xid_last, pcie_tx_bytes_per_s, pcie_rx_bytes_per_s, nvlink_tx_bytes_per_s,
    nvlink_rx_bytes_per_s, nvlink_bytes, source, util_source)
SELECT {cluster:String}, node, gpu, ts, {step_s:UInt32}, model_name, uuid, hpc_job,
    coalesce(gpu_util_pct, gr_engine_active * 100), sm_active,
    gr_engine_active, tensor_active, dram_active, fb_used_mib, fb_free_mib, power_w,
    counter_step_bounded(energy_j, energy_prev, dateDiff('second', energy_prev_ts, ts), gpu_max_power_w(model_name)),
    temp_c, sm_clock_mhz, throttle_reasons, xid_last, pcie_tx_bytes_per_s, pcie_rx_bytes_per_s,
    nvlink_tx_bytes_per_s, nvlink_rx_bytes_per_s, counter_step(nvlink_bytes, nvlink_prev), {source:String},
    multiIf(gpu_util_pct IS NOT NULL, 'DCGM_FI_DEV_GPU_UTIL', gr_engine_active IS NOT NULL,
            'DCGM_FI_PROF_GR_ENGINE_ACTIVE', '')
FROM (
    -- the window gives each sample its series' previous values as plain columns, and the steps are taken a
    -- level up: written inside the window's select (counter_step(v, lagInFrame(v) OVER series)), each mention
    -- of `prev` in the functions' bodies became another input of the expression after the window (EXPLAIN
    -- actions=1), and the statement cost a sixth more CPU for the same rows (docs/benchmarks.md, issue 50 round 7)
    SELECT *,
        anyLast(energy_j) OVER before AS energy_prev,
        anyLast(if(energy_j IS NULL, NULL, ts)) OVER before AS energy_prev_ts,
        lagInFrame(nvlink_bytes) OVER series AS nvlink_prev
    FROM ({{input}})
    WINDOW series AS (PARTITION BY node, gpu ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW),
        before AS (PARTITION BY node, gpu ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
)
WHERE ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')} AND node != '';

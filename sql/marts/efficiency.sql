-- Time-weighted efficiency of {project}'s runs (or every project's, for '') in [from_ts, to_ts), by
-- project and in total: the runs' GPU time inside the window and their share of their nodes' telemetry
-- (the run_node_hour grain's rates, as job_efficiency.sql reads them per run), summed over the runs. Means
-- are weighted by the GPU time with telemetry: the same as weighting each run's means (job_efficiency.sql)
-- by its telemetry GPU-hours, without forming every run first. Delivered tensor compute in PFLOP and in
-- PFLOP/s-days (÷ 86,400, as cost.sql's pflop_days). runs: the runs that held GPUs in the window, as
-- job_efficiency.sql lists them.
--- [mart]
--- grain = "one row per project, and the scope ('')"
--- scope = "project"
--- report = 7
--- previous = true
--- columns = ["project_key", "runs", "gpu_h", "observed_gpu_h", "gpu_util_pct", "sm_active", "tensor_active", "dram_active", "gpu_energy_kwh", "nic_rx_bytes", "nic_tx_bytes", "storage_read_bytes", "storage_write_bytes", "delivered_pflop", "delivered_pflop_days"]
--- export = 7
WITH
runs AS (
    SELECT if(grouping(project) = 1, '', project) AS project_key, count() AS runs
    FROM fct_job_run
    WHERE cluster = {cluster:String} AND ({project:String} = '' OR project = {project:String})
      AND NOT never_ran AND gpus > 0 AND length(nodes) > 0
      AND usage_start_ts < {to_ts:DateTime('UTC')} AND usage_end_ts > {from_ts:DateTime('UTC')}
    GROUP BY GROUPING SETS ((), (project))
),
used AS (
    SELECT
        if(grouping(d.project) = 1, '', d.project) AS project_key,
        sum(r.gpu_s) / 3600 AS gpu_h,
        -- (each product to fixed point, then summed: a Float64 sum changes in its last digits with the order the
        -- engine's threads add it in, docs/sql.md "Sums"; accurateCastOrNull, not toDecimal128: the engine also
        -- converts the value under a NULL rate, NaN where the grain divided by zero, which toDecimal128 refuses)
        toFloat64(sum(accurateCastOrNull(r.gpu_s * r.covered_per_capacity, 'Decimal(38, 9)')))
            / 3600 AS observed_gpu_h,
        toFloat64(sum(accurateCastOrNull(r.gpu_s * r.util_per_allocated, 'Decimal(38, 9)')))
            / nullIf(observed_gpu_h, 0) / 36 AS gpu_util_pct,
        toFloat64(sum(accurateCastOrNull(r.gpu_s * r.sm_per_allocated, 'Decimal(38, 9)')))
            / nullIf(observed_gpu_h, 0) / 3600 AS sm_active,
        toFloat64(sum(accurateCastOrNull(r.gpu_s * r.tensor_per_allocated, 'Decimal(38, 9)')))
            / nullIf(observed_gpu_h, 0) / 3600 AS tensor_active,
        toFloat64(sum(accurateCastOrNull(r.gpu_s * r.dram_per_allocated, 'Decimal(38, 9)')))
            / nullIf(observed_gpu_h, 0) / 3600 AS dram_active,
        toFloat64(sum(accurateCastOrNull(r.gpu_s * r.energy_j_per_allocated, 'Decimal(38, 9)')))
            / 3.6e6 AS gpu_energy_kwh,
        toFloat64(sum(accurateCastOrNull(r.gpu_s * r.nic_rx_per_capacity, 'Decimal(38, 9)'))) AS nic_rx_bytes,
        toFloat64(sum(accurateCastOrNull(r.gpu_s * r.nic_tx_per_capacity, 'Decimal(38, 9)'))) AS nic_tx_bytes,
        toFloat64(sum(accurateCastOrNull(r.gpu_s * r.read_per_capacity, 'Decimal(38, 9)'))) AS storage_read_bytes,
        toFloat64(sum(accurateCastOrNull(r.gpu_s * r.write_per_capacity, 'Decimal(38, 9)'))) AS storage_write_bytes,
        toFloat64(sum(accurateCastOrNull(r.gpu_s * r.tensor_per_allocated * ifNull(m.peak_bf16_tflops, 0), 'Decimal(38, 9)')))
            / 1000 AS delivered_pflop
    -- (Nullable: no GPU time at all is none, as the sum over no runs)
    FROM (SELECT * REPLACE (toNullable(gpus_per_node * overlap_s(s, e, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')})) AS gpu_s)
          FROM run_node_hour FINAL WHERE cluster = {cluster:String}
          AND hour >= toStartOfHour({from_ts:DateTime('UTC')}) AND hour < {to_ts:DateTime('UTC')}
          AND e > {from_ts:DateTime('UTC')} AND s < {to_ts:DateTime('UTC')}) AS r
    INNER JOIN dim_account AS d ON d.account = r.account
    LEFT JOIN (SELECT * FROM cost_model FINAL) AS m ON lower(nullIf(r.gpu_model, '')) = lower(m.gpu_model)
    WHERE {project:String} = '' OR d.project = {project:String}
    GROUP BY GROUPING SETS ((), (d.project))
)
SELECT
    n.project_key AS project_key,
    n.runs AS runs,
    u.gpu_h AS gpu_h,
    u.observed_gpu_h AS observed_gpu_h,
    u.gpu_util_pct AS gpu_util_pct,
    u.sm_active AS sm_active,
    u.tensor_active AS tensor_active,
    u.dram_active AS dram_active,
    u.gpu_energy_kwh AS gpu_energy_kwh,
    u.nic_rx_bytes AS nic_rx_bytes, u.nic_tx_bytes AS nic_tx_bytes,
    u.storage_read_bytes AS storage_read_bytes, u.storage_write_bytes AS storage_write_bytes,
    u.delivered_pflop AS delivered_pflop,
    u.delivered_pflop / 86400 AS delivered_pflop_days
FROM runs AS n
LEFT JOIN used AS u ON u.project_key = n.project_key
ORDER BY project_key
SETTINGS join_use_nulls = 1;

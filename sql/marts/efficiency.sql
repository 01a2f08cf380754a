-- Time-weighted efficiency of {project}'s runs (or every project's, for '') in [from_ts, to_ts), by
-- project and in total, from the per-run model (job_efficiency.sql, included below). Delivered tensor
-- compute in PFLOP and in PFLOP/s-days (÷ 86,400, as cost.sql's pflop_days).
SELECT
    if(grouping(r.project) = 1, '', r.project) AS project_key,
    count() AS runs,
    sum(r.gpu_hours) AS gpu_hours,
    sum(r.telemetry_gpu_hours) AS telemetry_gpu_hours,
    sum(r.gpu_util_pct * r.telemetry_gpu_hours) / nullIf(sum(r.telemetry_gpu_hours), 0) AS gpu_util_pct,
    sum(r.sm_active * r.telemetry_gpu_hours) / nullIf(sum(r.telemetry_gpu_hours), 0) AS sm_active,
    sum(r.tensor_active * r.telemetry_gpu_hours) / nullIf(sum(r.telemetry_gpu_hours), 0) AS tensor_active,
    sum(r.dram_active * r.telemetry_gpu_hours) / nullIf(sum(r.telemetry_gpu_hours), 0) AS dram_active,
    sum(r.gpu_energy_kwh) AS gpu_energy_kwh,
    sum(r.nic_rx_bytes) AS nic_rx_bytes, sum(r.nic_tx_bytes) AS nic_tx_bytes,
    sum(r.storage_read_bytes) AS storage_read_bytes, sum(r.storage_write_bytes) AS storage_write_bytes,
    sum(r.delivered_pflop) AS delivered_pflop,
    sum(r.delivered_pflop) / 86400 AS delivered_pflop_days
FROM ({{mart job_efficiency}}) AS r
GROUP BY GROUPING SETS ((), (r.project))
ORDER BY project_key;

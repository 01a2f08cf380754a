-- Recompute the hourly rollups of [from_ts, to_ts) from the fine tables (whole hours). Idempotent: the
-- rows of those hours are replaced (ReplacingMergeTree on refreshed_at).
--- [model]
--- kind = "incremental_by_time_range"
--- unit = "hour"
--- grain = "telemetry_hourly"
--- writes = ["gpu_hour", "node_hour"]
--- reads = ["gpu_sample", "node_sample"]
INSERT INTO gpu_hour
SELECT
    cluster, node, gpu, toStartOfHour(ts) AS hour,
    any(model_name),
    count() AS samples,
    sum(step_s) AS covered_s,
    avg(gpu_util_pct), avg(sm_active), avg(tensor_active), avg(dram_active),
    max(fb_used_mib),
    avg(power_w), max(power_w),
    sum(energy_j),
    max(temp_c),
    sum(if(gpu_is_throttled(throttle_reasons), step_s, 0)) AS throttled_s,
    now64(3)
FROM gpu_sample FINAL
WHERE ts >= toStartOfHour({from_ts:DateTime('UTC')}) AND ts < {to_ts:DateTime('UTC')}
GROUP BY cluster, node, gpu, hour;

INSERT INTO node_hour
SELECT
    cluster, node, toStartOfHour(ts) AS hour,
    count() AS samples,
    sum(toUInt64(arraySum(nic_rx_bytes))), sum(toUInt64(arraySum(nic_tx_bytes))),
    sum(toUInt64(ifNull(lustre_read_bytes, 0))), sum(toUInt64(ifNull(lustre_write_bytes, 0))),
    avg(node_power_w),
    now64(3)
FROM node_sample FINAL
WHERE ts >= toStartOfHour({from_ts:DateTime('UTC')}) AND ts < {to_ts:DateTime('UTC')}
GROUP BY cluster, node, hour;

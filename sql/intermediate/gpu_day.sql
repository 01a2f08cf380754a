-- Recompute gpu_day (see migration 0012) for the days [from_ts, to_ts) touches, from the hourly GPU
-- rollups (gpu_hour, refreshed just before by sql/intermediate/telemetry_hourly.sql): per GPU and day, the
-- time with samples and the time-weighted sums the GPU marts divide by it. A day's row is written again
-- whole (ReplacingMergeTree on refreshed_at), so a reload or backfill of any of its hours leaves it as a
-- clean load does.
--- [model]
--- kind = "incremental_by_time_range"
--- unit = "day"
--- grain = "gpu_day"
--- writes = ["gpu_day"]
--- reads = ["gpu_hour"]
INSERT INTO gpu_day
SELECT
    cluster, node, gpu, toDate(hour) AS day,
    any(model_name),
    sum(covered_s),
    sum(gpu_util_pct_avg * covered_s),
    sum(power_w_avg * covered_s),
    sum(throttled_s),
    max(temp_c_max),
    now64(3)
FROM gpu_hour FINAL
WHERE hour >= toStartOfDay(toDateTime({from_ts:DateTime('UTC')}, 'UTC'))
  AND hour < toStartOfDay(toDateTime({to_ts:DateTime('UTC')}, 'UTC') - 1) + INTERVAL 1 DAY
GROUP BY cluster, node, gpu, day;

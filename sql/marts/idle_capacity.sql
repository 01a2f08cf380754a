-- Where capacity that could have been used went unused in [from_ts, to_ts), GPU-hours and shares of
-- capacity, per level (cluster, gpu_model, partition) and key as in utilization.sql (included below):
-- free (no job, no reservation), reserved but unused, allocated but idle (a job held the GPU, telemetry saw
-- it under the idle threshold), down and drained.
--- [mart]
--- grain = "one row per level (cluster, GPU model, partition) and key"
--- scope = "cluster"
--- columns = ["level", "key", "capacity_gpu_h", "free_gpu_h", "reserved_idle_gpu_h", "allocated_idle_gpu_h", "down_gpu_h", "drained_gpu_h", "free_share", "reserved_idle_share", "allocated_idle_share", "down_share", "drained_share"]
--- filters = { level = "level" }
--- export = 2
SELECT
    u.level AS level, u.key AS key, u.capacity_gpu_h AS capacity_gpu_h, u.free_gpu_h AS free_gpu_h,
    u.reserved_idle_gpu_h AS reserved_idle_gpu_h, u.allocated_idle_gpu_h AS allocated_idle_gpu_h,
    u.down_gpu_h AS down_gpu_h, u.drained_gpu_h AS drained_gpu_h,
    u.free_gpu_h / nullIf(u.capacity_gpu_h, 0) AS free_share,
    u.reserved_idle_gpu_h / nullIf(u.capacity_gpu_h, 0) AS reserved_idle_share,
    u.allocated_idle_gpu_h / nullIf(u.capacity_gpu_h, 0) AS allocated_idle_share,
    u.down_gpu_h / nullIf(u.capacity_gpu_h, 0) AS down_share,
    u.drained_gpu_h / nullIf(u.capacity_gpu_h, 0) AS drained_share
FROM ({{mart utilization}}) AS u
ORDER BY level, key;

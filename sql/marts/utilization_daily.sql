-- The capacity of each day of [from_ts, to_ts) split into down, drained, allocated, reserved-idle and free
-- GPU-hours (the stacked timeline of the monthly report), with {project}'s own allocation ('' for none:
-- the run_node_hour grain's GPU time of its runs).
-- A month in progress has days up to the time the loaded data reaches (data_through.sql).
--- [mart]
--- grain = "one row per day"
--- scope = "project"
--- report = 2
--- columns = ["day", "capacity_gpu_h", "down_gpu_h", "drained_gpu_h", "allocated_gpu_h", "reserved_idle_gpu_h", "free_gpu_h", "allocated_idle_gpu_h", "project_allocated_gpu_h"]
--- export = 3
WITH project_alloc AS (
    SELECT toDate(r.hour) AS day,
           sum(r.gpus_per_node * overlap_s(r.s, r.e, {from_ts:DateTime('UTC')}, {to_ts:DateTime('UTC')})) / 3600 AS gpu_h
    FROM (SELECT * FROM run_node_hour FINAL WHERE cluster = {cluster:String}
          AND hour >= toStartOfHour({from_ts:DateTime('UTC')}) AND hour < {to_ts:DateTime('UTC')}
          AND e > {from_ts:DateTime('UTC')} AND s < {to_ts:DateTime('UTC')}) AS r
    INNER JOIN (SELECT account FROM dim_account WHERE project = {project:String}) AS d ON d.account = r.account
    GROUP BY day
)
SELECT
    c.day AS day,
    c.capacity_gpu_h, c.down_gpu_h, c.drained_gpu_h, c.allocated_gpu_h, c.reserved_idle_gpu_h,
    c.free_gpu_h,
    c.allocated_idle_gpu_h,
    ifNull(p.gpu_h, 0) AS project_allocated_gpu_h
FROM (
    SELECT toDate(hour) AS day,
           sum(capacity_gpu_s) / 3600 AS capacity_gpu_h, sum(down_gpu_s) / 3600 AS down_gpu_h,
           sum(drained_gpu_s) / 3600 AS drained_gpu_h, sum(allocated_gpu_s) / 3600 AS allocated_gpu_h,
           sum(reserved_idle_gpu_s) / 3600 AS reserved_idle_gpu_h, sum(free_gpu_s) / 3600 AS free_gpu_h,
           sum(allocated_idle_gpu_s(allocated_observed_gpu_s, busy_gpu_s)) / 3600 AS allocated_idle_gpu_h
    FROM capacity_node_hour FINAL
    WHERE cluster = {cluster:String} AND hour >= {from_ts:DateTime('UTC')} AND hour < {to_ts:DateTime('UTC')}
      AND hour < (SELECT through_ts FROM ({{mart data_through}}))
    GROUP BY day
) AS c
LEFT JOIN project_alloc AS p ON c.day = p.day
ORDER BY day
SETTINGS join_use_nulls = 1;

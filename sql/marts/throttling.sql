-- GPUs that ran with a thermal or power clock-event reason set in [from_ts, to_ts) (DCGM throttle bits
-- 0x04 SW power cap, 0x08 HW slowdown, 0x20 SW thermal, 0x40 HW thermal, 0x80 HW power brake: the rule
-- sql/functions/gpu_is_throttled.sql, counted into gpu_hour by sql/intermediate/telemetry_hourly.sql),
-- hours per GPU, with its peak temperature. Hours that ended by the time the loaded data reaches
-- (data_through.sql), as in capacity_node_hour: whole days from the daily rollup (gpu_day), the other
-- hours from gpu_hour, as in gpu_heatmap.sql.
--- [mart]
--- grain = "one row per throttled GPU"
--- scope = "cluster"
--- report = 17
--- columns = ["node", "gpu", "gpu_model", "throttled_hours", "temp_c_max"]
--- export = 13
WITH
    (SELECT through_ts FROM ({{mart data_through}})) AS cut,
    toStartOfDay({from_ts:DateTime('UTC')} + 86399) AS d0,
    toStartOfDay(least({to_ts:DateTime('UTC')}, cut)) AS d1,
per_gpu AS (
    SELECT node, gpu, model_name, throttled_s, temp_c_max
    FROM gpu_day FINAL
    WHERE cluster = {cluster:String} AND day >= toDate(d0) AND day < toDate(d1)
    UNION ALL
    SELECT node, gpu, model_name, throttled_s, temp_c_max
    FROM gpu_hour FINAL
    WHERE cluster = {cluster:String} AND hour >= {from_ts:DateTime('UTC')} AND hour < {to_ts:DateTime('UTC')}
      AND hour + 3600 <= cut AND NOT (hour >= d0 AND hour < d1)
)
SELECT node, gpu, any(model_name) AS gpu_model, sum(throttled_s) / 3600 AS throttled_hours,
       max(temp_c_max) AS temp_c_max
FROM per_gpu
GROUP BY node, gpu
HAVING throttled_hours > 0
ORDER BY throttled_hours DESC, node, gpu;

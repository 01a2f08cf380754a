-- Mean GPU utilization (%) and power (W) of every GPU over [from_ts, to_ts), its hottest sample (°C) and
-- the share of its covered time it was throttled, with its rack and node (the rack → node → GPU heatmap,
-- and Grafana's GPU grid); GPUs without telemetry are absent. Hours that ended by the time the loaded
-- data reaches (data_through.sql), as in capacity_node_hour: the whole days of the window that ended by
-- then from the daily rollup (gpu_day), the other hours from the hourly one (gpu_hour); both are
-- time-weighted sums over the hours with samples, so the split changes no figure.
--- [mart]
--- grain = "one row per GPU (rack, node, index)"
--- scope = "cluster"
--- report = 19
--- columns = ["rack", "node", "gpu", "gpu_util_pct", "power_w", "temp_c_max", "throttled_share"]
--- export = 15
WITH
    (SELECT through_ts FROM ({{mart data_through}})) AS cut,
    toStartOfDay({from_ts:DateTime('UTC')} + 86399) AS d0,
    toStartOfDay(least({to_ts:DateTime('UTC')}, cut)) AS d1,
per_gpu AS (
    SELECT node, gpu, covered_s, util_pct_s, power_w_s, temp_c_max, throttled_s
    FROM gpu_day FINAL
    WHERE cluster = {cluster:String} AND day >= toDate(d0) AND day < toDate(d1)
    UNION ALL
    SELECT node, gpu, covered_s, gpu_util_pct_avg * covered_s, power_w_avg * covered_s, temp_c_max, throttled_s
    FROM gpu_hour FINAL
    WHERE cluster = {cluster:String} AND hour >= {from_ts:DateTime('UTC')} AND hour < {to_ts:DateTime('UTC')}
      AND hour + 3600 <= cut AND NOT (hour >= d0 AND hour < d1)
)
SELECT ifNull(i.rack, '') AS rack, g.node AS node, g.gpu AS gpu,
       sum(g.util_pct_s) / nullIf(sum(g.covered_s), 0) AS gpu_util_pct,
       sum(g.power_w_s) / nullIf(sum(g.covered_s), 0) AS power_w,
       max(g.temp_c_max) AS temp_c_max,
       sum(g.throttled_s) / nullIf(sum(g.covered_s), 0) AS throttled_share
FROM per_gpu AS g
LEFT JOIN (SELECT node, any(rack) AS rack FROM node_inventory FINAL WHERE cluster = {cluster:String} GROUP BY node) AS i
    ON g.node = i.node
GROUP BY rack, node, gpu
ORDER BY rack, node, gpu
SETTINGS join_use_nulls = 1;

-- Mean GPU utilization (%) and power (W) of every GPU over [from_ts, to_ts), with its rack and node (the
-- rack → node → GPU heatmap); GPUs without telemetry are absent. Hours that ended by the time the loaded
-- data reaches (data_through.sql), as in capacity_node_hour.
SELECT ifNull(i.rack, '') AS rack, g.node AS node, g.gpu AS gpu,
       sum(g.gpu_util_pct_avg * g.covered_s) / nullIf(sum(g.covered_s), 0) AS gpu_util_pct,
       sum(g.power_w_avg * g.covered_s) / nullIf(sum(g.covered_s), 0) AS power_w
FROM (SELECT * FROM gpu_hour FINAL WHERE cluster = {cluster:String}
      AND hour >= {from_ts:DateTime('UTC')} AND hour < {to_ts:DateTime('UTC')}
      AND hour + 3600 <= (SELECT through_ts FROM ({{mart data_through}}))) AS g
LEFT JOIN (SELECT node, rack FROM node_inventory FINAL WHERE cluster = {cluster:String}) AS i ON g.node = i.node
GROUP BY rack, node, gpu
ORDER BY rack, node, gpu
SETTINGS join_use_nulls = 1;

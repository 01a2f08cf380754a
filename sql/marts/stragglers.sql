-- Straggler nodes in [from_ts, to_ts): in a synchronous multi-node job every GPU waits for the slowest, so
-- a node whose GPUs are persistently less active than its peers' costs the whole job. For each run of
-- {project} ('' for all) on 2+ nodes with telemetry, a node is behind when its time-weighted GPU
-- utilization is under {behind_ratio} of the median of the run's nodes; per node: the multi-node runs it
-- took part in, how often it was behind, and its utilization relative to its peers on average; the nodes
-- behind in at least one run, with the ratio they were judged by.
WITH pieces AS (
    SELECT r.job_id AS job_id, r.submit_ts AS submit_ts, r.node AS node,
           sum(c.util_gpu_s / nullIf(c.covered_gpu_s, 0) * r.held_s)
             / nullIf(sum(if(c.covered_gpu_s > 0, r.held_s, 0)), 0) AS util
    FROM ({{intermediate run_node_hour}}) AS r
    INNER JOIN (SELECT node, hour, util_gpu_s, covered_gpu_s FROM capacity_node_hour FINAL
                WHERE cluster = {cluster:String} AND hour >= {from_ts:DateTime('UTC')}
                  AND hour < {to_ts:DateTime('UTC')}) AS c ON c.node = r.node AND c.hour = r.hour
    WHERE r.cluster = {cluster:String} AND ({project:String} = '' OR r.project = {project:String})
      AND r.run_node_count >= 2
    GROUP BY job_id, submit_ts, node
    HAVING util IS NOT NULL
),
rated AS (
    SELECT *, util / nullIf(median(util) OVER (PARTITION BY job_id, submit_ts), 0) AS vs_peers,
           count() OVER (PARTITION BY job_id, submit_ts) AS nodes_seen
    FROM pieces
)
SELECT node,
       count() AS multi_node_runs,
       countIf(vs_peers < {behind_ratio:Float64}) AS runs_behind,
       avg(vs_peers) AS util_vs_peers,
       avg(util) * 100 AS util_pct,
       {behind_ratio:Float64} AS behind_ratio
FROM rated
WHERE nodes_seen >= 2
GROUP BY node
HAVING runs_behind > 0
ORDER BY runs_behind DESC, util_vs_peers, node;
